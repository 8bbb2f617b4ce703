"""Reading the model configs at an archive's root: shared by the archive checks
(:mod:`~ml_platform.triton.repository`) and the archive facts
(:mod:`~ml_platform.triton.archive_meta`), so neither imports the other."""

from __future__ import annotations

import tarfile
from collections.abc import Iterator

__all__ = ["MAX_CONFIG_BYTES", "read_member", "root_configs"]

MAX_CONFIG_BYTES = 1 << 20  # a config.pbtxt is a few KiB; refuse to read anything huge


def root_configs(tar: tarfile.TarFile) -> Iterator[tuple[str, tarfile.TarInfo]]:
    """The ``<model>/config.pbtxt`` files at the archive's root, with their model folder."""
    for member in tar:
        parts = member.name.removeprefix("./").split("/")
        if len(parts) == 2 and parts[1] == "config.pbtxt" and member.isfile():
            yield parts[0], member


def read_member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    """The bytes of a regular file of ``tar`` (what :func:`root_configs` yields)."""
    handle = tar.extractfile(member)
    if handle is None:  # extractfile gives None only for what is not a file
        raise ValueError(f"{member.name}: not a regular file")
    return handle.read()
