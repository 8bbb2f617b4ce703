"""Names of versioned ensemble archives: the one contract shared by packaging, settings, IAM,
upload, listing and invocation.

A multi-model endpoint must never see a model object overwritten in place (the old version may
stay loaded: https://docs.aws.amazon.com/sagemaker/latest/dg/add-models-to-endpoint.html), so
every archive is stored under a key that carries its content version:

* logical name: ``model_trt_python`` (lower-case letters, digits, ``_`` and ``-``);
* version: ``v`` + the first 8 hex digits of the SHA-256 of the archive's bytes;
* object key (the ``TargetModel``): ``<logical>-<version>.tar.gz``, e.g.
  ``model_trt_python-v1a2b3c4d.tar.gz``;
* reference (settings, ``mlp`` arguments): ``<logical>`` (any version; the newest where one
  must be chosen) or ``<logical>@<version>`` (exactly that one).

Kept free of heavy imports: settings validation and the CLI use it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ARCHIVE_SUFFIX",
    "SHA256_METADATA",
    "VERSION_LENGTH",
    "ArchiveRef",
    "archive_file",
    "content_version",
    "logical_problem",
    "parse_key",
    "parse_ref",
    "parse_refs",
    "ref_problems",
    "shown_versioned",
    "unversioned_name_problem",
    "version_mismatch_problem",
    "versioned_key",
]

ARCHIVE_SUFFIX = ".tar.gz"
#: The object metadata key (``x-amz-meta-sha256``) in which ``mlp models upload`` records an
#: archive's full SHA-256, and which the Triton-on-EKS fetch verifies the download against.
SHA256_METADATA = "sha256"
VERSION_LENGTH = 8
_LOGICAL = r"[a-z0-9](?:[a-z0-9_-]{0,98}[a-z0-9])?"
_VERSION = rf"v[0-9a-f]{{{VERSION_LENGTH}}}"
_LOGICAL_RE = re.compile(rf"^{_LOGICAL}$")
_VERSION_RE = re.compile(rf"^{_VERSION}$")
_KEY_RE = re.compile(
    rf"^(?P<logical>{_LOGICAL})-(?P<version>{_VERSION}){re.escape(ARCHIVE_SUFFIX)}$"
)
_REF_RE = re.compile(rf"^(?P<logical>{_LOGICAL})(?:@(?P<version>{_VERSION}))?$")


def archive_file(logical: str) -> str:
    """The file an unversioned archive is built as, before packaging versions it:
    ``<logical>.tar.gz``."""
    return f"{logical}{ARCHIVE_SUFFIX}"


def shown_versioned(logical: str) -> str:
    """How help texts show the versioned file of ``logical``: ``<logical>-v<version>.tar.gz``."""
    return f"{logical}-v<version>{ARCHIVE_SUFFIX}"


def content_version(data: bytes | Path) -> str:
    """The version of an archive's content: ``v`` + 8 hex digits of its SHA-256."""
    digest = hashlib.sha256()
    if isinstance(data, Path):
        with data.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    else:
        digest.update(data)
    return "v" + digest.hexdigest()[:VERSION_LENGTH]


@dataclass(frozen=True, order=True)
class ArchiveRef:
    """A logical archive, optionally pinned to one version."""

    logical: str
    version: str | None = None

    @property
    def key(self) -> str:
        """The object key (relative to the model prefix); only for a pinned version."""
        if self.version is None:
            raise ValueError(f"archive {self.logical!r} names no version, so it has no key")
        return f"{self.logical}-{self.version}{ARCHIVE_SUFFIX}"

    @property
    def key_pattern(self) -> str:
        """The exact key, or an IAM/S3 wildcard matching every version of the logical name."""
        if self.version is not None:
            return self.key
        return f"{self.logical}-v*{ARCHIVE_SUFFIX}"

    def matches(self, key: str) -> bool:
        parsed = parse_key(key)
        return (
            parsed is not None
            and parsed.logical == self.logical
            and (self.version is None or parsed.version == self.version)
        )

    def __str__(self) -> str:
        return self.logical if self.version is None else f"{self.logical}@{self.version}"


def logical_problem(name: object) -> str | None:
    """``None`` if ``name`` is a valid logical archive name, else what is wrong."""
    if isinstance(name, str) and _LOGICAL_RE.match(name):
        return None
    return (
        f"{name!r} is not a logical archive name: expected 1-100 characters of lower-case "
        "letters, digits, '_' and '-', starting and ending with a letter or digit"
    )


def parse_ref(text: object) -> ArchiveRef:
    """Parse ``NAME`` or ``NAME@vXXXXXXXX``; raises ``ValueError`` naming what is allowed."""
    match = _REF_RE.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(
            f"{text!r} is not an archive reference: expected NAME or NAME@vXXXXXXXX (NAME of "
            "lower-case letters, digits, '_' and '-'; the version 'v' and 8 hex digits)"
        )
    return ArchiveRef(match["logical"], match["version"])


def parse_refs(
    key: str, archives: Sequence[str | ArchiveRef]
) -> tuple[list[ArchiveRef | None], list[str]]:
    """A list of archive references (``NAME`` or ``NAME@vXXXXXXXX``) that ``key`` names (a
    dotted setting or a prop), parsed: each reference (``None`` where one is malformed) and the
    problems of the list: at least one, each well-formed, none twice."""
    out = [] if archives else [f"{key} = []: expected at least one archive"]
    refs: list[ArchiveRef | None] = []
    for i, archive in enumerate(archives):
        try:
            refs.append(archive if isinstance(archive, ArchiveRef) else parse_ref(archive))
        except ValueError as error:
            refs.append(None)
            out.append(f"{key}[{i}] = {archive!r}: {error}")
    parsed = [r for r in refs if r is not None]
    duplicates = sorted({str(r) for r in parsed if parsed.count(r) > 1})
    if duplicates:
        out.append(f"{key}: {duplicates} given more than once")
    return refs, out


def ref_problems(key: str, archives: Sequence[str | ArchiveRef]) -> list[str]:
    """The problems :func:`parse_refs` finds in ``archives``."""
    return parse_refs(key, archives)[1]


def parse_key(key: str) -> ArchiveRef | None:
    """The archive a versioned object key names, or ``None`` if ``key`` is not one."""
    match = _KEY_RE.match(key)
    return ArchiveRef(match["logical"], match["version"]) if match else None


def unversioned_name_problem(name: str) -> str | None:
    """Why an archive file or key ``name`` cannot be uploaded under its own name, or ``None``:
    an archive on S3 is never overwritten, so its name must carry its content's version."""
    if parse_key(name) is not None:
        return None
    return (
        "not a versioned archive name: expected <logical>-v<8 hex digits>.tar.gz, as "
        "`mlp models package` names it"
    )


def version_mismatch_problem(name: str, version: str) -> str | None:
    """Why a versioned ``name`` does not fit content of ``version``, or ``None``."""
    named = parse_key(name)
    if named is None or named.version == version:
        return None
    return (
        f"named version {named.version}, but its content is version {version} (repackage it "
        "with mlp models package)"
    )


def versioned_key(logical: str, version: str) -> str:
    """``<logical>-<version>.tar.gz``, checking both parts."""
    problem = logical_problem(logical)
    if problem:
        raise ValueError(problem)
    if not _VERSION_RE.match(version):
        raise ValueError(f"{version!r} is not an archive version: expected 'v' and 8 hex digits")
    return ArchiveRef(logical, version).key
