"""The rule of ``inference.upload_dir``: a folder of built archives that the deploy-time upload
(:class:`ml_platform.constructs._model_upload.ModelArchiveUpload`) may put under the model
prefix. No CDK imports; the heavy checks import what they need only when the folder holds
archives."""

from __future__ import annotations

import os
import stat

from ml_platform.limits import shown

# Caps of `inference.upload_dir`: the deploy-time upload is a Lambda-backed BucketDeployment.
UPLOAD_DIR_MAX_ARCHIVES = 100


def file_kind(path: os.PathLike[str] | str) -> str:
    """What ``path`` is, without opening or following it: "a regular file", "a FIFO",
    "a folder", "a symbolic link"... ("missing" when it does not exist)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as error:
        return f"unreadable ({error.strerror or error})"
    for test, what in _KINDS:
        if test(mode):
            return what
    return "not a regular file"  # pragma: no cover (every st_mode kind is listed)


_KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def upload_dir_problems(
    upload_dir: str, key: str = "inference.upload_dir", *, triton_version: str | None = None
) -> list[str]:
    """Problems of a local folder of archives to upload at deploy time: it must be a folder
    whose ``*.tar.gz`` archives have versioned names matching their content (as
    ``mlp models upload`` requires), are safe to unpack and servable (the checker runs only
    when the folder holds archives, so protobuf loads only then), and loadable by Triton
    ``triton_version`` when given (``inference.triton_version``: backends, the plan's
    TensorRT, an execution environment's Python; :mod:`ml_platform.triton.archive_meta`)."""
    from pathlib import Path

    try:
        folder = Path(upload_dir)
        is_dir = folder.is_dir()
        exists = folder.exists()
    except (OSError, ValueError):  # e.g. an embedded NUL byte or a name too long
        return [f"{key} = {shown(upload_dir)}: not a usable path"]
    if not is_dir:
        what = "is not a directory" if exists else "does not exist"
        return [f"{key} = {shown(upload_dir)}: {what}; expected a folder of built archives"]
    out = []
    archives = []
    # Only regular files are opened: a FIFO would block synth forever, a folder named like an
    # archive would not open, and a link could point anywhere.
    for entry in sorted(folder.glob("*.tar.gz")):
        kind = file_kind(entry)
        if kind == "a regular file":
            archives.append(entry)
        else:
            out.append(
                f"{key} = {shown(upload_dir)}: {entry.name} is {kind}; only regular files are "
                "uploaded: remove it or replace it with the archive file"
            )
    if out:
        return out
    if not archives:
        return [f"{key} = {shown(upload_dir)}: holds no *.tar.gz archive"]
    if len(archives) > UPLOAD_DIR_MAX_ARCHIVES:
        return [
            f"{key} = {shown(upload_dir)}: {len(archives)} archives, at most {UPLOAD_DIR_MAX_ARCHIVES}"
        ]
    from ml_platform.triton.archive_names import (
        content_version,
        unversioned_name_problem,
        version_mismatch_problem,
    )
    from ml_platform.triton.archive_safety import ArchiveSafetyError, check_archive

    for archive in archives:
        # The name and content-version rules of `mlp models upload`.
        problem = unversioned_name_problem(archive.name) or version_mismatch_problem(
            archive.name, content_version(archive)
        )
        if problem:
            out.append(f"{key} = {shown(upload_dir)}: {archive.name}: {problem}")
        try:
            check_archive(archive)
        except ArchiveSafetyError as error:
            out.append(f"{key} = {shown(upload_dir)}: {error}")
            continue
        from ml_platform.triton.repository import archive_problems

        out += [
            f"{key} = {shown(upload_dir)}: {archive.name}: {p}" for p in archive_problems(archive)
        ]
        if triton_version is not None:
            from ml_platform.triton.archive_meta import read_archive_facts, release_problems

            where = f"{key} = {shown(upload_dir)}: {archive.name}: inference.triton_version"
            where += f" {triton_version!r}"
            out += release_problems(where, read_archive_facts(archive), triton_version)
    return out
