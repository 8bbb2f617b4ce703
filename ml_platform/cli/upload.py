"""``mlp models upload``: put ensemble archives under the endpoint's S3 model prefix.

The bucket and prefix come from the Storage stack's outputs. Every archive is checked
before anything is uploaded: its name must be a valid ``TargetModel`` and it must hold
exactly one ``<model>/config.pbtxt`` at its root with ``platform: "ensemble"`` (the
folder a multi-model endpoint serves).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ml_platform.cli.aws import (
    CliError,
    Context,
    doc_summary,
    one_line,
    require_output,
    stack_outputs,
)

STORAGE = "Storage"


def add_parser(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "upload",
        parents=parents,
        help="upload archives to the model bucket's prefix",
        description=doc_summary(__doc__),
    )
    p.add_argument("paths", nargs="*", type=Path, default=[Path("dist/models")],
                   help="archives, or folders whose *.tar.gz are uploaded (default: dist/models)")
    p.set_defaults(run=run)


def collect_archives(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """Expand folders into their ``*.tar.gz`` files; report missing paths and duplicates."""
    archives: list[Path] = []
    problems: list[str] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*.tar.gz"))
            if not found:
                problems.append(f"{path}: no *.tar.gz archives in this folder")
            archives.extend(found)
        elif path.is_file():
            archives.append(path)
        else:
            problems.append(f"{path}: no such file or folder")
    names = [a.name for a in archives]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{name}: given more than once (archives share one prefix)")
    return archives, problems


def run(ctx: Context, args: argparse.Namespace) -> int:
    archives, problems = collect_archives(args.paths)
    from ml_platform.triton.archive_safety import archive_safety_problems

    for archive in archives:
        from ml_platform.triton.repository import archive_gpu_target, archive_problems
        from ml_platform.triton.targets import serving_problems

        # Unsafe members (links, '..', devices, oversize) first; an unreadable archive is
        # reported once, by the servability check.
        unsafe = [p for p in archive_safety_problems(archive) if "not a readable tar" not in p]
        problems.extend(f"{archive}: {p}" for p in unsafe)
        problems.extend(f"{archive}: {p}" for p in archive_problems(archive))
        gpu, gpu_problems = archive_gpu_target(archive)  # the GPU its plan was built for
        problems.extend(f"{archive}: {p}" for p in gpu_problems)
        problems.extend(serving_problems(archive.name, gpu, ctx.settings))
    if problems:
        raise CliError("refusing to upload:\n" + "\n".join(f"  - {p}" for p in problems))

    outputs = stack_outputs(ctx, STORAGE)
    bucket = require_output(ctx, STORAGE, outputs, "ModelBucketName")
    prefix = require_output(ctx, STORAGE, outputs, "ModelPrefix")
    s3 = ctx.client("s3")
    uris = _upload(s3, archives, bucket, prefix)
    for archive, uri in zip(archives, uris, strict=True):
        print(f"{uri}  (TargetModel {archive.name})")
    return 0


def _upload(s3, archives: list[Path], bucket: str, prefix: str) -> list[str]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    uris = []
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    from boto3.exceptions import S3UploadFailedError
    from botocore.exceptions import ClientError

    with Progress(*columns, console=Console(stderr=True)) as progress:
        for archive in archives:
            task = progress.add_task(archive.name, total=archive.stat().st_size)
            key = f"{prefix}{archive.name}"
            # boto3 calls back from its transfer threads with the bytes just sent.
            try:
                s3.upload_file(
                    str(archive),
                    bucket,
                    key,
                    Callback=lambda sent, task=task: progress.advance(task, sent),
                )
            except (S3UploadFailedError, ClientError) as error:
                done = ", ".join(uris) if uris else "none"
                raise CliError(
                    f"uploading {archive.name} to s3://{bucket}/{key} failed: "
                    f"{one_line(str(error))}; already uploaded: {done}"
                ) from None
            uris.append(f"s3://{bucket}/{key}")
    return uris
