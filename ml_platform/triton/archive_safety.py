"""What a model archive may hold, checked before it is uploaded or unpacked.

A model archive (``<name>.tar.gz``) holds Triton model folders at its root and nothing else.
Every member must be a regular file or a directory, inside a model folder, with a relative
name free of ``..``; sizes are capped per member and in total. Anything else (absolute or
``../`` names, symlinks, hardlinks, device files, FIFOs, files at the root, duplicates,
setuid bits, sizes above the caps) is refused with an error naming the archive and member.

This module uses the standard library only and runs on Python 3.10 (the ``python3`` of
NVIDIA's Triton images): the Triton-on-EKS init container runs this very file to unpack the
archives (``python3 -c <this source> <dest> <archive>...``), and ``mlp models package`` /
``mlp models upload`` and ``inference.upload_dir`` call :func:`check_archive`.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tarfile
from collections.abc import Iterator
from typing import Any

#: Largest member, uncompressed: a TensorRT plan or ONNX encoder of a few GiB fits.
MAX_MEMBER_BYTES = 4 * 1024**3
#: Largest archive, uncompressed (also bounds a gzip bomb: reading stops at the cap).
MAX_TOTAL_BYTES = 16 * 1024**3
#: Most members in one archive.
MAX_MEMBERS = 20_000
#: Longest member name.
MAX_NAME_LENGTH = 1024
#: Most problems listed in one error.
MAX_LISTED = 20
#: Largest extension header (a GNU long name or long link, a PAX extended or global header).
#: ``tarfile`` reads such a header whole into memory before any other check, so its declared
#: size is checked first: a name is at most MAX_NAME_LENGTH characters, and a PAX header holds
#: a few records (path, times, owner names).
MAX_HEADER_BYTES = 64 * 1024
#: Most extension headers before one member (GNU tar writes a long name and a long link;
#: PAX writes one extended header).
MAX_HEADERS_PER_MEMBER = 4
#: Largest sum of extension headers in one archive (a dataset of many long names passes its
#: own). Bounds the names ``tarfile`` keeps in memory and the time spent parsing them.
MAX_HEADER_TOTAL_BYTES = 16 * 1024**2

_TYPE_NAMES = {
    tarfile.SYMTYPE: "a symbolic link",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a FIFO",
    tarfile.CONTTYPE: "a contiguous file",
    tarfile.GNUTYPE_SPARSE: "a sparse file",
}


class ArchiveSafetyError(ValueError):
    """An archive holds members that must not be unpacked; the message names each."""


class HeaderCapError(tarfile.TarError):
    """An extension header passes a cap; raised before the header is read. Not a
    ``tarfile.HeaderError``: those end the member list silently after the first member."""


_EXTENSION_NAMES = {
    tarfile.GNUTYPE_LONGNAME: "a GNU long-name header",
    tarfile.GNUTYPE_LONGLINK: "a GNU long-link header",
    tarfile.XHDTYPE: "a PAX extended header",
    tarfile.XGLTYPE: "a PAX global header",
    tarfile.SOLARIS_XHDTYPE: "a Solaris extended header",
}


class _CappedTarInfo(tarfile.TarInfo):
    """A ``TarInfo`` that checks an extension header's declared size against the caps of
    the :class:`SafeTarFile` reading it before ``tarfile`` reads the header into memory,
    refuses GNU sparse members (their maps are read unbounded) and keeps no copy of the PAX
    records (``pax_headers``) per member."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        where = f"header at byte {self.offset}"
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise HeaderCapError(f"{where}: a GNU sparse member; sparse files are not allowed")
        what = _EXTENSION_NAMES.get(self.type)
        if what is None:
            tarfile_._mlp_in_row = 0  # type: ignore[attr-defined]
            return super()._proc_member(tarfile_)  # type: ignore[misc, no-any-return]
        per_header = MAX_HEADER_BYTES
        total_cap = getattr(tarfile_, "max_header_total_bytes", MAX_HEADER_TOTAL_BYTES)
        in_row = getattr(tarfile_, "_mlp_in_row", 0) + 1
        total = getattr(tarfile_, "_mlp_header_total", 0) + self.size
        tarfile_._mlp_in_row = in_row  # type: ignore[attr-defined]
        tarfile_._mlp_header_total = total  # type: ignore[attr-defined]
        if self.size > per_header:
            raise HeaderCapError(
                f"{where}: {what} of {self.size} bytes, above the cap of {per_header} bytes"
            )
        if in_row > MAX_HEADERS_PER_MEMBER:
            raise HeaderCapError(
                f"{where}: more than {MAX_HEADERS_PER_MEMBER} extension headers before one member"
            )
        if total > total_cap:
            raise HeaderCapError(
                f"{where}: extension headers pass the cap of {total_cap} bytes per archive"
            )
        return super()._proc_member(tarfile_)  # type: ignore[misc, no-any-return]

    def _refuse_sparse(self, *args: object) -> None:
        raise HeaderCapError(
            f"header at byte {self.offset}: a PAX sparse member; sparse files are not allowed"
        )

    _proc_gnusparse_00 = _proc_gnusparse_01 = _proc_gnusparse_10 = _refuse_sparse

    def _apply_pax_info(self, pax_headers: dict[str, str], encoding: str, errors: str) -> None:
        super()._apply_pax_info(pax_headers, encoding, errors)  # type: ignore[misc]
        self.pax_headers = {}


class SafeTarFile(tarfile.TarFile):
    """A ``TarFile`` whose extension headers are size-checked before they are read (see
    :class:`_CappedTarInfo`)."""

    tarinfo = _CappedTarInfo

    def __init__(self, *args: Any, max_header_total_bytes: int | None = None, **kwargs: Any):
        # set before TarFile.__init__ reads the first member
        self.max_header_total_bytes = max_header_total_bytes or MAX_HEADER_TOTAL_BYTES
        super().__init__(*args, **kwargs)


def open_archive(
    path: str | os.PathLike, mode: str = "r:*", *, max_header_total_bytes: int | None = None
) -> tarfile.TarFile:
    """Open a (compressed) tar archive for reading with capped extension headers
    (:data:`MAX_HEADER_BYTES` each, ``max_header_total_bytes`` in all). Every reader of an
    archive goes through this: ``tarfile.open`` reads a header of any declared size into
    memory. A header over a cap raises :class:`HeaderCapError` (a ``TarError``)."""
    opened: tarfile.TarFile = SafeTarFile.open(  # type: ignore[call-overload]
        path, mode, max_header_total_bytes=max_header_total_bytes
    )
    return opened


def _members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """The members one by one, none kept (``for m in tar`` keeps every ``TarInfo``)."""
    while True:
        member = tar.next()
        if member is None:
            return
        tar.members.clear()  # type: ignore[attr-defined]
        yield member


def _member_problem(member: tarfile.TarInfo, max_member_bytes: int | None = None) -> str | None:
    """Why ``member`` may not be unpacked, or ``None``."""
    if max_member_bytes is None:
        max_member_bytes = MAX_MEMBER_BYTES
    name = member.name
    if not name or len(name) > MAX_NAME_LENGTH:
        return f"name of {len(name)} characters (1 to {MAX_NAME_LENGTH})"
    if any(ord(c) < 32 or c == "\x7f" for c in name) or "\\" in name:
        return "name holds control characters or a backslash"
    if name.startswith("/"):
        return "absolute name"
    parts = name.split("/")
    if parts[-1] == "" and member.isdir():
        parts = parts[:-1]  # 'model/' names a directory
    if parts and parts[0] == ".":
        parts = parts[1:]  # 'tar -C dir .' writes './model/...'
    if ".." in parts:
        return "name climbs out with '..'"
    if any(p in ("", ".") for p in parts):
        return "name has an empty or '.' segment"
    if not member.isfile() and not member.isdir():
        what = _TYPE_NAMES.get(member.type, f"of tar type {member.type!r}")
        return f"is {what}; only regular files and directories are allowed"
    if member.isfile() and member.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
        return f"is {_TYPE_NAMES.get(member.type, 'a special file')}"
    if member.mode & (stat.S_ISUID | stat.S_ISGID):
        return "has the setuid or setgid bit"
    if member.isfile() and len(parts) < 2:
        return "is a file at the archive root; files belong inside a model folder"
    if member.size > max_member_bytes:
        return f"is {member.size} bytes, above the cap of {max_member_bytes} per member"
    return None


def _normalized(name: str) -> str:
    return "/".join(p for p in name.split("/") if p not in ("", "."))


# gzip member header ID1 = 31, ID2 = 139: https://www.rfc-editor.org/rfc/rfc1952#section-2.3.1
GZIP_MAGIC = b"\x1f\x8b"


def _reason(path: str | os.PathLike, error: BaseException) -> str:
    """One line for why tarfile could not read ``path`` (its "r:*" error lists every
    compression it tried, one per line)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(2)
    except OSError:
        head = GZIP_MAGIC
    if head != GZIP_MAGIC:
        return "not gzip-compressed: a .tar.gz archive starts with the gzip bytes 1f 8b"
    return " ".join(str(error).split())[:300]


def archive_safety_problems(
    path: str | os.PathLike,
    *,
    max_total_bytes: int | None = None,
    max_member_bytes: int | None = None,
    max_members: int | None = None,
    max_header_total_bytes: int | None = None,
) -> list[str]:
    """Every reason the archive at ``path`` may not be unpacked (empty when it may). The caps
    default to a model archive's (the module's ``MAX_*``); larger archives (a dataset) pass
    their own."""
    max_total_bytes = MAX_TOTAL_BYTES if max_total_bytes is None else max_total_bytes
    max_members = MAX_MEMBERS if max_members is None else max_members
    problems: list[str] = []
    seen: set[str] = set()
    total = 0
    count = 0
    try:
        with open_archive(path, max_header_total_bytes=max_header_total_bytes) as tar:
            for member in _members(tar):
                count += 1
                if count > max_members:
                    problems.append(f"more than {max_members} members")
                    break
                problem = _member_problem(member, max_member_bytes)
                if problem:
                    problems.append(f"member {member.name[:200]!r}: {problem}")
                    continue
                key = _normalized(member.name)
                if key and key in seen:
                    problems.append(f"member {member.name[:200]!r}: appears more than once")
                seen.add(key)
                total += member.size if member.isfile() else 0
                if total > max_total_bytes:
                    problems.append(
                        f"member {member.name[:200]!r}: unpacked size passes the cap of "
                        f"{max_total_bytes} bytes per archive"
                    )
                    break
    except HeaderCapError as error:
        problems.append(f"{error} (refused before reading it)")
    except (tarfile.TarError, OSError, EOFError, ValueError) as error:
        problems.append(f"not a readable tar archive ({_reason(path, error)})")
    if not problems and not any("/" in k for k in seen):
        problems.append("holds no model folder (no file inside a folder at the root)")
    return problems


def check_archive(path: str | os.PathLike, **caps: int) -> None:
    """Raise :class:`ArchiveSafetyError` naming the archive and every unsafe member
    (``caps`` as :func:`archive_safety_problems` takes them)."""
    problems = archive_safety_problems(path, **caps)
    if problems:
        listed = problems[:MAX_LISTED]
        more = len(problems) - len(listed)
        tail = f"; and {more} more" if more else ""
        raise ArchiveSafetyError(f"{os.fspath(path)}: " + "; ".join(listed) + tail)


def extract_archive(path: str | os.PathLike, dest: str | os.PathLike, **caps: int) -> list[str]:
    """Check the archive (``caps`` as :func:`archive_safety_problems` takes them), then unpack
    it into ``dest`` (which must exist).

    Members are created one by one: directories with mode 0o755, files with 0o644 opened with
    ``O_EXCL | O_NOFOLLOW``, so nothing already in ``dest`` (another archive's models, a link)
    is overwritten or followed. Ownership and times are not restored.

    Returns:
        The top-level model folders unpacked.
    """
    check_archive(path, **caps)
    root = os.path.realpath(dest)
    folders: list[str] = []
    with open_archive(path, max_header_total_bytes=caps.get("max_header_total_bytes")) as tar:
        for member in _members(tar):
            rel = _normalized(member.name)
            if not rel:
                continue
            target = os.path.join(root, *rel.split("/"))
            if os.path.commonpath([root, os.path.realpath(os.path.dirname(target))]) != root:
                raise ArchiveSafetyError(
                    f"{os.fspath(path)}: member {member.name!r}: leaves {root}"
                )
            top = rel.split("/")[0]
            if top not in folders:
                folders.append(top)
            if member.isdir():
                os.makedirs(target, mode=0o755, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            try:
                fd = os.open(target, flags, 0o644)
            except FileExistsError:
                raise ArchiveSafetyError(
                    f"{os.fspath(path)}: member {member.name!r}: {rel} already exists in {root}"
                ) from None
            source = tar.extractfile(member)
            with os.fdopen(fd, "wb") as out:
                if source is not None:
                    shutil.copyfileobj(source, out, 1 << 20)
    return folders


def main(argv: list[str]) -> int:
    """``python3 archive_safety.py DEST ARCHIVE...``: check every archive, then unpack each."""
    if len(argv) < 2:
        print("usage: archive_safety DEST ARCHIVE...", file=sys.stderr)
        return 2
    dest, archives = argv[0], argv[1:]
    problems = []
    for archive in archives:
        try:
            check_archive(archive)
        except ArchiveSafetyError as error:
            problems.append(str(error))
    if problems:
        print("refusing to unpack:\n" + "\n".join(f"  - {p}" for p in problems), file=sys.stderr)
        return 1
    for archive in archives:
        try:
            folders = extract_archive(archive, dest)
        except (ArchiveSafetyError, OSError) as error:
            print(f"refusing to unpack: {error}", file=sys.stderr)
            return 1
        print(f"{archive}: unpacked {', '.join(folders)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
