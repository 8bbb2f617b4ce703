"""``mlp models upload``: put versioned ensemble archives under the endpoint's S3 model prefix.

Archives are immutable: each is named ``<logical>-v<8 hex>.tar.gz`` after its content (as
``mlp models package`` writes it), a key that already holds the same content is skipped, and a
key holding other content is never overwritten (a multi-model endpoint may keep serving the
old object). Archives are checked and uploaded in parallel (``--concurrency``) under one
progress display; the first problem stops further uploads, every archive is still checked and
all problems are listed. Bucket and prefix come from the Storage stack's outputs.
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ml_platform.triton.archive_names import (
    parse_key,
    unversioned_name_problem,
    version_mismatch_problem,
)
from ml_platform_cli.archives import (
    SHA256_METADATA,
    list_archives,
    model_location,
    sha256_file,
    version_of_digest,
)
from ml_platform_cli.aws import CliError, Context, Subcommands, doc_summary, error_code, one_line

DEFAULT_CONCURRENCY = 16
MAX_CONCURRENCY = 128
#: Files up to this size go up in one PutObject; larger ones through boto3's transfer manager
#: in parts (its default multipart threshold).
MULTIPART_THRESHOLD = 8 * 1024 * 1024
PART_THREADS = 4  # parallel parts of one large archive


def _archive_problems(path: Path) -> list[str]:
    from ml_platform.triton.repository import archive_problems

    return archive_problems(path)


def _archive_safety(path: Path) -> list[str]:
    from ml_platform.triton.archive_safety import archive_safety_problems

    # Unsafe members (links, '..', devices, oversize); an unreadable archive is reported once,
    # by the servability check.
    return [p for p in archive_safety_problems(path) if "not a readable tar" not in p]


#: The per-archive validation hook: each check takes an archive's path and returns its
#: problems (empty when fine). They run in the upload's worker threads, one archive after
#: another per thread, in parallel with other archives' uploads; an archive is uploaded only
#: when every check passes. Add checks here (e.g. archive safety) rather than in the pipeline.
ARCHIVE_CHECKS: list[Callable[[Path], list[str]]] = [_archive_safety, _archive_problems]


def check_archive(path: Path, extra: tuple[Callable[[Path], list[str]], ...] = ()) -> list[str]:
    """Every problem :data:`ARCHIVE_CHECKS` (and ``extra`` checks) find in one archive."""
    problems: list[str] = []
    for check in (*ARCHIVE_CHECKS, *extra):
        problems.extend(check(path))
    return problems


def version_problems(path: Path, digest: str) -> list[str]:
    """A versioned name whose version is not its content's (``digest``, hex SHA-256)."""
    problem = version_mismatch_problem(path.name, version_of_digest(digest))
    return [problem] if problem else []


def _identity(stat: os.stat_result) -> tuple[int, ...]:
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def gpu_target_problems(path: Path, settings: Any) -> list[str]:
    """The GPU the archive's TensorRT plan was built for, against what its name says and the
    GPUs of the endpoints and node group that ``settings`` give it to."""
    from ml_platform.triton.repository import archive_gpu_target
    from ml_platform.triton.targets import serving_problems

    gpu, problems = archive_gpu_target(path)
    return problems + serving_problems(path.name, gpu, settings)


def release_problems_of(path: Path, settings: Any) -> list[str]:
    """Why the settings' Triton release (``inference.triton_version``, which the endpoints and
    Triton on EKS run) cannot load the archive: its backends, its plan's TensorRT, its
    execution environment's Python (:mod:`ml_platform.triton.archive_meta`)."""
    from ml_platform.triton.archive_meta import read_archive_facts, release_problems

    release = settings.inference.triton_version
    where = f"inference.triton_version {release!r}"
    return release_problems(where, read_archive_facts(path), release)


def add_parser(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "upload",
        parents=parents,
        help="upload versioned archives to the model bucket's prefix (never overwrites)",
        description=doc_summary(__doc__),
    )
    p.add_argument(
        "paths",
        nargs="*",
        type=Path,
        default=[Path("dist/models")],
        help="archives, or folders whose *.tar.gz are uploaded (default: dist/models)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"archives checked and uploaded at once (default: {DEFAULT_CONCURRENCY})",
    )
    p.set_defaults(run=run)


def duplicate_names(names: Iterable[str]) -> list[str]:
    """Names given more than once (they would share one key), in one pass."""
    counts = Counter(names)
    return sorted(name for name, count in counts.items() if count > 1)


def _kind(path: Path) -> str:
    """What ``path`` is, following a link (``triton.upload_dir.file_kind`` of its target)."""
    from ml_platform.triton.upload_dir import file_kind

    return file_kind(path.resolve()) if path.is_symlink() else file_kind(path)


def _not_an_archive_file(path: Path) -> str:
    kind = _kind(path)
    if kind == "missing":  # a link to nothing
        return "a link to a file that does not exist"
    return f"is {kind}, not a regular file; expected an archive file or a folder of them"


def collect_archives(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """Expand folders into their ``*.tar.gz`` files; report missing paths, duplicates and
    names that are not versioned archive keys."""
    archives: list[Path] = []
    problems: list[str] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*.tar.gz"))
            if not found:
                problems.append(f"{path}: no *.tar.gz archives in this folder")
            for entry in found:
                # Only regular files (or links to one) are opened: a FIFO would block.
                if entry.is_file():
                    archives.append(entry)
                else:
                    problems.append(f"{entry}: {_not_an_archive_file(entry)}")
        elif path.is_file():
            archives.append(path)
        elif _kind(path) == "missing":
            problems.append(f"{path}: no such file or folder")
        else:
            problems.append(f"{path}: {_not_an_archive_file(path)}")
    for name in duplicate_names(a.name for a in archives):
        problems.append(f"{name}: given more than once (archives share one prefix)")
    for archive in archives:
        problem = unversioned_name_problem(archive.name)
        if problem:
            problems.append(f"{archive}: {problem}")
    return archives, problems


@dataclass
class Outcome:
    """What happened to one archive: uploaded, skipped (same content there), refused, or
    not started (an earlier problem stopped the upload)."""

    path: Path
    key: str
    state: str = "not started"
    problems: list[str] = field(default_factory=list)
    sent: int = 0  # bytes already counted by the transfer manager's callback
    error: BaseException | None = None


@dataclass
class UploadReport:
    outcomes: list[Outcome]
    seconds: float

    def count(self, state: str) -> int:
        return sum(1 for o in self.outcomes if o.state == state)

    @property
    def problems(self) -> list[str]:
        return [p for o in self.outcomes for p in o.problems]


def new_progress(console: Any) -> Any:
    """The one progress display: archives done of all, bytes, speed and time left."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    return Progress(
        TextColumn(
            "{task.fields[done]}/{task.fields[count]} archives "
            "({task.fields[uploaded]} uploaded, {task.fields[skipped]} skipped)"
        ),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
    )


class _Tally:
    """Thread-safe counters behind the single progress task."""

    def __init__(self, progress: Any, count: int, total_bytes: int) -> None:
        self._lock = threading.Lock()
        self._progress = progress
        self._counts = {"done": 0, "uploaded": 0, "skipped": 0}
        self._task = progress.add_task("upload", total=total_bytes, count=count, **self._counts)

    def bytes(self, amount: int) -> None:
        self._progress.advance(self._task, amount)

    def finished(self, state: str, unsent_bytes: int) -> None:
        with self._lock:
            self._counts["done"] += 1
            if state in self._counts:
                self._counts[state] += 1
            self._progress.update(self._task, advance=unsent_bytes, **self._counts)


def _if_none_match(params: dict[str, Any], **_: Any) -> None:
    # Conditional write: S3 refuses to create the object if the key exists (HTTP 412), so a
    # concurrent writer can never be overwritten. https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html
    params.setdefault("IfNoneMatch", "*")


def upload_client(ctx: Context, concurrency: int) -> Any:
    """An S3 client with a connection for every worker and every part thread."""
    from botocore.config import Config

    s3 = ctx.session().client(
        "s3",
        region_name=ctx.region,
        config=Config(max_pool_connections=max(10, concurrency * (PART_THREADS + 1))),
    )
    return s3


class _Uploader:
    def __init__(
        self,
        s3: Any,
        bucket: str,
        prefix: str,
        existing: dict[str, Any],
        tally: _Tally,
        checks: tuple[Callable[[Path], list[str]], ...],
    ) -> None:
        self.s3, self.bucket, self.prefix = s3, bucket, prefix
        self.checks = checks
        self.existing = existing
        self.tally = tally
        self.stop = threading.Event()
        self._sent_lock = threading.Lock()
        # Multipart uploads finish with CompleteMultipartUpload: make that conditional too.
        s3.meta.events.register(
            "before-parameter-build.s3.CompleteMultipartUpload",
            _if_none_match,
            unique_id="mlp-upload-if-none-match",
        )

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}{key}"

    def run(self, outcome: Outcome) -> Outcome:
        path = outcome.path
        size = path.stat().st_size
        try:
            self._run(outcome, size)
        except BaseException as error:
            self.stop.set()  # an unexpected (e.g. AWS) error: start nothing more
            outcome.state, outcome.error = "failed", error
            raise
        finally:
            if outcome.problems:
                self.stop.set()
            self.tally.finished(outcome.state, size - outcome.sent)
        return outcome

    def _run(self, outcome: Outcome, size: int) -> None:
        path = outcome.path
        # One open file from the hash to the last byte sent: what is sent is what was
        # hashed and checked. The checks read the path, so the path must still be this file
        # (same inode, size and times) once they are done.
        with open_archive(path) as handle:
            before = os.fstat(handle.fileno())
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
            problems = [f"{path}: {p}" for p in version_problems(path, digest)]
            problems += [f"{path}: {p}" for p in check_archive(path, self.checks)]
            if not problems and _identity(os.stat(path)) != _identity(before):
                problems.append(
                    f"{path}: changed while it was checked; nothing of it was "
                    "uploaded (run the upload again)"
                )
            if problems:
                outcome.state, outcome.problems = "refused", problems
                return
            if self.stop.is_set():
                return
            key = self.prefix + outcome.key
            if outcome.key in self.existing:
                self._compare(outcome, key, digest, before.st_size)
                return
            try:
                self._put(outcome, key, digest, before.st_size, handle)
            except Exception as error:
                # upload_file wraps the ClientError of a refused CompleteMultipartUpload.
                if not {error_code(error), error_code(error.__cause__)} & {
                    "PreconditionFailed",
                    "412",
                }:
                    raise
                self._compare(outcome, key, digest, before.st_size)  # created since the listing
                return
        if outcome.problems:
            outcome.state = "refused"
            return
        outcome.state = "uploaded"

    def _put(self, outcome: Outcome, key: str, digest: str, size: int, handle: Any) -> None:
        from ml_platform.triton.archive_meta import read_archive_facts

        # What it was built for, so `mlp models list` can tell which releases load it.
        metadata = {**read_archive_facts(outcome.path).s3_metadata(), SHA256_METADATA: digest}
        handle.seek(0)
        if size <= MULTIPART_THRESHOLD:
            # S3 checks the bytes it receives against this SHA-256 and refuses a mismatch
            # (BadDigest): https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity.html
            checksum = base64.b64encode(bytes.fromhex(digest)).decode()
            self.s3.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=handle,
                Metadata=metadata,
                IfNoneMatch="*",
                ChecksumSHA256=checksum,
            )
            return
        from boto3.s3.transfer import TransferConfig

        config = TransferConfig(
            multipart_threshold=MULTIPART_THRESHOLD, max_concurrency=PART_THREADS
        )

        def sent(amount: int) -> None:
            with self._sent_lock:  # the parts of one archive report from several threads
                outcome.sent += amount
            self.tally.bytes(amount)

        # Parts carry their own SHA-256 (S3 verifies each); the whole is hashed as it is read
        # and compared with the checked digest.
        reader = _HashingReader(handle)
        self.s3.upload_fileobj(
            reader,
            self.bucket,
            key,
            ExtraArgs={"Metadata": metadata, "ChecksumAlgorithm": "SHA256"},
            Config=config,
            Callback=sent,
        )
        if reader.hexdigest() != digest:
            outcome.problems = [
                f"{outcome.path}: changed while it was uploaded: {self.uri(outcome.key)} does "
                f"not hold the checked content; retire it (mlp models retire "
                f"{parse_key(outcome.key)} --force) and upload again"
            ]

    def _compare(self, outcome: Outcome, key: str, digest: str, size: int) -> None:
        """Skip when the object holds the same bytes; refuse (never overwrite) otherwise."""
        head = self.s3.head_object(Bucket=self.bucket, Key=key)
        remote = head.get("Metadata", {}).get(SHA256_METADATA)
        etag = head.get("ETag", "").strip('"')
        if remote is not None:
            same = remote == digest
        elif head.get("ContentLength") != size:
            same = False
        elif "-" not in etag and head.get("ServerSideEncryption") != "aws:kms":
            same = etag == _md5_file(outcome.path)  # a single-part, non-KMS ETag is the MD5
        else:
            outcome.state = "refused"
            outcome.problems = [
                f"{self.uri(outcome.key)} already exists and its content cannot be compared "
                "(no sha256 metadata, and its ETag is not an MD5); it was left alone"
            ]
            return
        if same:
            outcome.state = "skipped"
        else:
            outcome.state = "refused"
            outcome.problems = [
                f"{self.uri(outcome.key)} already exists with different content; archives are "
                "immutable, so it was left alone (repackage to get a new version)"
            ]


def open_archive(path: Path) -> Any:
    """``path`` opened for reading (a link to an archive is followed, as the checks follow it;
    :meth:`_Uploader._run` then holds the path to the file it opened)."""
    return path.open("rb")


class _HashingReader:
    """A read-only stream over ``handle`` that hashes what it hands out (not seekable, so
    boto3's transfer manager reads it once, in order)."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data: bytes = self._handle.read(size)
        self._digest.update(data)
        return data

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


def _md5_file(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def upload_archives(
    s3: Any,
    archives: list[Path],
    bucket: str,
    prefix: str,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    console: Any = None,
    checks: tuple[Callable[[Path], list[str]], ...] = (),
) -> UploadReport:
    """Check and upload ``archives`` (versioned names) under ``s3://bucket/prefix``.

    Cost is linear: one paginated listing of the prefix, one hash and one check pass per
    archive, one PutObject per new archive (HeadObject only for keys already there).
    """
    from rich.console import Console

    started = time.perf_counter()
    # Import the checker once here: worker threads then find it loaded.
    from ml_platform.triton import repository  # noqa: F401

    existing = {a.key: a for a in list_archives(s3, bucket, prefix)}
    outcomes = [Outcome(path, path.name) for path in archives]
    total = sum(path.stat().st_size for path in archives)
    progress = new_progress(console or Console(stderr=True))
    with progress:
        tally = _Tally(progress, len(archives), total)
        uploader = _Uploader(s3, bucket, prefix, existing, tally, checks)
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="mlp-upload") as pool:
            futures = [pool.submit(uploader.run, outcome) for outcome in outcomes]
            for future in futures:
                future.exception()  # wait; failures are read from the outcomes below
    failed = next((o for o in outcomes if o.state == "failed"), None)
    if failed is not None and failed.error is not None:  # a failed outcome carries its error
        from boto3.exceptions import S3UploadFailedError
        from botocore.exceptions import ClientError

        if not isinstance(failed.error, S3UploadFailedError | ClientError):
            raise failed.error
        done = (
            ", ".join(f"s3://{bucket}/{prefix}{o.key}" for o in outcomes if o.state == "uploaded")
            or "none"
        )
        raise CliError(
            f"uploading {failed.key} to s3://{bucket}/{prefix}{failed.key} failed: "
            f"{one_line(str(failed.error))}; already uploaded: {done}"
        )
    return UploadReport(outcomes, time.perf_counter() - started)


def _all_problems(path: Path, checks: tuple[Callable[[Path], list[str]], ...]) -> list[str]:
    """The content-version check and every archive check (the upload's own order)."""
    return version_problems(path, sha256_file(path)) + check_archive(path, checks)


def _human(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def run(ctx: Context, args: argparse.Namespace) -> int:
    if not 1 <= args.concurrency <= MAX_CONCURRENCY:
        raise CliError(f"--concurrency {args.concurrency}: expected 1 to {MAX_CONCURRENCY}")
    archives, problems = collect_archives(args.paths)
    settings = ctx.settings
    checks = (
        functools.partial(gpu_target_problems, settings=settings),
        functools.partial(release_problems_of, settings=settings),
    )
    if problems:  # report the archives' own problems too, all at once, uploading nothing
        unique = list(dict.fromkeys(archives))
        with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            found_all = pool.map(functools.partial(_all_problems, checks=checks), unique)
            for path, found in zip(unique, found_all, strict=True):
                problems.extend(f"{path}: {p}" for p in found)
        raise CliError("refusing to upload:\n" + "\n".join(f"  - {p}" for p in problems))
    bucket, prefix = model_location(ctx)
    report = upload_archives(
        upload_client(ctx, args.concurrency),
        archives,
        bucket,
        prefix,
        concurrency=args.concurrency,
        checks=checks,
    )
    for outcome in report.outcomes:
        if outcome.state in ("uploaded", "skipped"):
            note = "uploaded" if outcome.state == "uploaded" else "skipped: same content there"
            print(f"s3://{bucket}/{prefix}{outcome.key}  ({note})")
    size = sum(o.path.stat().st_size for o in report.outcomes if o.state == "uploaded")
    summary = (
        f"{len(archives)} archive(s): {report.count('uploaded')} uploaded "
        f"({_human(size)}), {report.count('skipped')} skipped (same content), "
        f"{report.count('refused')} refused, {report.count('not started')} not started; "
        f"{report.seconds:.2f} s"
    )
    print(summary, file=sys.stderr)
    if report.problems:
        raise CliError("refusing to upload:\n" + "\n".join(f"  - {p}" for p in report.problems))
    return 0
