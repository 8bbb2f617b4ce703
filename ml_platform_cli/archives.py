"""Versioned ensemble archives in the model bucket: naming, listing, resolution, references.

One module for what ``mlp models package/upload/list/retire`` and ``mlp invoke`` share. Keys
follow :mod:`ml_platform.triton.archive_names`: ``<logical>-v<8 hex>.tar.gz`` under the
Storage stack's model prefix. "Newest" means the latest S3 ``LastModified``; S3 reports it to
the second, so two versions uploaded in the same second are a tie, which resolution refuses
(name the version) and reference checks count as referenced (both of them).

Nothing heavy is imported at module level: ``mlp --help`` must stay fast.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ml_platform.triton import archive_names
from ml_platform.triton.archive_names import (
    ARCHIVE_SUFFIX,
    ArchiveRef,
    logical_problem,
    parse_key,
    parse_ref,
    versioned_key,
)
from ml_platform_cli.aws import CliError, Context, require_output, stack_outputs

if TYPE_CHECKING:
    from ml_platform.config import Settings

STORAGE = "Storage"
#: Object metadata key (``x-amz-meta-sha256``) holding the full SHA-256 of an uploaded archive
#: (defined with the archive names, which the Triton-on-EKS fetch also reads).
SHA256_METADATA = archive_names.SHA256_METADATA
#: The consumer name of Triton on EKS in reference reports (endpoints use their own names).
TRITON_ON_EKS = "triton-on-eks"


def model_location(ctx: Context) -> tuple[str, str]:
    """``(bucket, prefix)`` of the archives, from the Storage stack's outputs."""
    outputs = stack_outputs(ctx, STORAGE)
    bucket = require_output(ctx, STORAGE, outputs, "ModelBucketName")
    prefix = require_output(ctx, STORAGE, outputs, "ModelPrefix")
    return bucket, prefix


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks (hashlib releases the GIL on each)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def version_of_digest(sha256_hex: str) -> str:
    """The archive version of a SHA-256 (what ``archive_names.content_version`` computes)."""
    return "v" + sha256_hex[:8]


def version_archive(path: Path) -> tuple[Path, list[Path]]:
    """Rename ``<logical>.tar.gz`` to ``<logical>-<version>.tar.gz`` in its folder, and remove
    the other versions of ``<logical>`` there (outputs of earlier runs), so the folder holds
    one version per logical name for ``mlp models upload``.

    Returns:
        The versioned path and the removed stale versions.
    """
    logical = path.name.removesuffix(ARCHIVE_SUFFIX)
    problem = logical_problem(logical)
    if problem or not path.name.endswith(ARCHIVE_SUFFIX):
        raise ValueError(f"{path.name}: cannot version it: {problem or 'not a .tar.gz'}")
    target = path.with_name(versioned_key(logical, version_of_digest(sha256_file(path))))
    stale = sorted(
        other
        for other in path.parent.glob(f"{logical}-v*{ARCHIVE_SUFFIX}")
        if other != target and (ref := parse_key(other.name)) and ref.logical == logical
    )
    for other in stale:
        other.unlink()
    path.replace(target)
    return target, stale


@dataclass(frozen=True)
class StoredArchive:
    """One ``*.tar.gz`` object under the prefix (``key`` relative to it)."""

    key: str
    size: int
    last_modified: datetime
    etag: str

    @property
    def ref(self) -> ArchiveRef | None:
        """The versioned archive the key names; ``None`` for an unversioned key."""
        return parse_key(self.key)


def list_archives(
    s3: Any, bucket: str, prefix: str, *, logical: str | None = None
) -> list[StoredArchive]:
    """Every ``*.tar.gz`` under ``prefix`` (only versions of ``logical`` when given), through
    every page of ListObjectsV2 (1,000 keys per page)."""
    list_prefix = prefix + (f"{logical}-v" if logical else "")
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=list_prefix):
        for item in page.get("Contents", []):
            key = item["Key"][len(prefix) :]
            if key.endswith(ARCHIVE_SUFFIX):
                out.append(
                    StoredArchive(
                        key, item["Size"], item["LastModified"], item.get("ETag", "").strip('"')
                    )
                )
    return out


def newest(archives: Iterable[StoredArchive]) -> dict[str, list[StoredArchive]]:
    """Per logical name, its newest versions (more than one only on a LastModified tie)."""
    best: dict[str, list[StoredArchive]] = {}
    for archive in archives:
        ref = archive.ref
        if ref is None:
            continue
        current = best.get(ref.logical)
        if current is None or archive.last_modified > current[0].last_modified:
            best[ref.logical] = [archive]
        elif archive.last_modified == current[0].last_modified:
            current.append(archive)
    return best


def resolve(s3: Any, bucket: str, prefix: str, text: str) -> tuple[str, StoredArchive | None]:
    """The key (relative to the prefix) a reference names: ``NAME`` -> its newest version,
    ``NAME@VERSION`` -> exactly that version (which must exist).

    Returns:
        The key and, when it was listed, the object.

    Raises:
        CliError: Not a reference, no such archive/version, or a LastModified tie.
    """
    try:
        ref = parse_ref(text)
    except ValueError as error:
        raise CliError(f"--model: {error}") from None
    found = list_archives(s3, bucket, prefix, logical=ref.logical)
    where = f"s3://{bucket}/{prefix}"
    if ref.version is not None:
        match = next((a for a in found if a.key == ref.key), None)
        if match is None:
            have = (
                ", ".join(sorted(a.ref.version for a in found if a.ref and a.ref.version)) or "none"
            )
            raise CliError(
                f"archive {text} not found under {where} (versions of {ref.logical} there: {have})"
            )
        return match.key, match
    candidates = newest(found).get(ref.logical)
    if not candidates:
        raise CliError(
            f"no version of archive {ref.logical!r} under {where}: upload it first "
            "(mlp models upload)"
        )
    if len(candidates) > 1:
        names = ", ".join(sorted(str(c.ref) for c in candidates))
        raise CliError(
            f"archive {ref.logical!r}: {len(candidates)} versions share the newest "
            f"upload time ({names}); name one as NAME@VERSION"
        )
    return candidates[0].key, candidates[0]


@dataclass(frozen=True)
class Reference:
    """One archive named by the settings of one consumer (an endpoint, or Triton on EKS)."""

    consumer: str
    text: str

    @property
    def ref(self) -> ArchiveRef | None:
        """``NAME``/``NAME@VERSION`` (or a versioned key); ``None`` for an unversioned key."""
        try:
            return parse_ref(self.text)
        except ValueError:
            return parse_key(self.text)


def settings_references(settings: Settings) -> list[Reference]:
    """Every archive the settings' endpoints (and Triton on EKS, when on) serve."""
    refs: list[Reference] = []
    if settings.features.inference:
        for endpoint in settings.inference.endpoints:
            refs.extend(Reference(endpoint.name, str(a)) for a in endpoint.archives)
    if settings.features.triton_on_eks:
        refs.extend(Reference(TRITON_ON_EKS, str(a)) for a in settings.triton_on_eks.archives)
    return refs


def referenced_by(
    archives: list[StoredArchive], references: list[Reference]
) -> dict[str, list[str]]:
    """Key -> sorted consumers whose settings reference it: by exact version, by key, or by
    logical name (its newest versions). Linear in archives plus references."""
    latest = newest(archives)
    out: dict[str, set[str]] = defaultdict(set)
    for reference in references:
        ref = reference.ref
        if ref is None:
            keys: Iterator[str] = iter([reference.text])
        elif ref.version is not None:
            keys = iter([ref.key])
        else:
            keys = (a.key for a in latest.get(ref.logical, []))
        for key in keys:
            out[key].add(reference.consumer)
    return {key: sorted(consumers) for key, consumers in out.items()}
