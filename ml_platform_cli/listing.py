"""``mlp models list``: every archive under the model prefix, with its version, size, upload
time, the endpoints whose settings reference it, and whether the configured Triton release
(``inference.triton_version``) can load it, from what ``mlp models upload`` recorded of it
(one HeadObject per archive; ``?`` for an archive uploaded without that record).

A logical name in the settings references its newest version; ``NAME@VERSION`` that version.
Every page of the listing is read (S3 returns at most 1,000 keys per page).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC
from typing import Any

from ml_platform.triton.archive_meta import ArchiveFacts, release_problems
from ml_platform_cli.archives import (
    StoredArchive,
    list_archives,
    model_location,
    referenced_by,
    settings_references,
)
from ml_platform_cli.aws import Context, Subcommands, doc_summary


def add_parser(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "list",
        parents=parents,
        help="archives under the model prefix: version, size, upload time, references",
        description=doc_summary(__doc__),
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=run)


def catalog(ctx: Context) -> dict[str, Any]:
    """The listing as plain data (what ``--json`` prints)."""
    from concurrent.futures import ThreadPoolExecutor

    bucket, prefix = model_location(ctx)
    s3 = ctx.client("s3")
    archives = list_archives(s3, bucket, prefix)
    references = referenced_by(archives, settings_references(ctx.settings))
    release = ctx.settings.inference.triton_version

    def facts(archive: StoredArchive) -> ArchiveFacts | None:
        head = s3.head_object(Bucket=bucket, Key=prefix + archive.key)
        return ArchiveFacts.from_s3_metadata(head.get("Metadata", {}))

    with ThreadPoolExecutor(max_workers=HEAD_CONCURRENCY) as pool:
        recorded = list(pool.map(facts, archives))
    rows = [
        _row(a, references.get(a.key, []), f, release)
        for a, f in zip(archives, recorded, strict=True)
    ]
    rows.sort(key=lambda r: (r["logical"], r["last_modified"], r["key"]), reverse=False)
    return {"bucket": bucket, "prefix": prefix, "triton_version": release, "archives": rows}


#: Parallel HeadObject requests of the listing.
HEAD_CONCURRENCY = 16


def _row(
    archive: StoredArchive, consumers: list[str], facts: ArchiveFacts | None, release: str
) -> dict[str, Any]:
    ref = archive.ref
    name = f"{ref.logical}@{ref.version}" if ref else archive.key
    return {
        "key": archive.key,
        "logical": ref.logical if ref else archive.key.removesuffix(".tar.gz"),
        "version": ref.version if ref else None,
        "size": archive.size,
        "last_modified": archive.last_modified.astimezone(UTC).isoformat(),
        "referenced_by": consumers,
        "built_for": facts.triton_release if facts else None,
        # None: nothing recorded (uploaded before the record existed, or by other means).
        "release_problems": release_problems(name, facts, release) if facts else None,
    }


def _loads(row: dict[str, Any]) -> str:
    problems = row["release_problems"]
    return "?" if problems is None else "no" if problems else "yes"


def run(ctx: Context, args: argparse.Namespace) -> int:
    report = catalog(ctx)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    rows = report["archives"]
    where = f"s3://{report['bucket']}/{report['prefix']}"
    console = Console() if sys.stdout.isatty() else Console(width=160)
    logical = len({r["logical"] for r in rows})
    size = sum(r["size"] for r in rows)
    print(f"{where}: {len(rows)} archive(s) of {logical} logical name(s), {size:,} bytes")
    table = Table()
    release = report["triton_version"]
    columns = ("Archive", "Version", "Size", "Uploaded (UTC)", "Referenced by", "Built for")
    for column in (*columns, f"Loads on {release}"):
        table.add_column(column, justify="right" if column == "Size" else "left")
    for row in rows:
        table.add_row(
            row["logical"],
            row["version"] or "(unversioned)",
            _size(row["size"]),
            row["last_modified"][:19].replace("T", " "),
            ", ".join(row["referenced_by"]) or "-",
            row["built_for"] or "-",
            _loads(row),
        )
    console.print(table)
    for problem in (p for r in rows for p in r["release_problems"] or []):
        print(f"cannot load on Triton {release} (inference.triton_version): {problem}")
    if any(r["release_problems"] is None for r in rows):
        print(
            "?: no record of what the archive was built for (uploaded before mlp models upload "
            "recorded it): upload it again to record it"
        )
    return 0


def _size(size: int) -> str:
    return (
        f"{size:,} B"
        if size < 1024
        else f"{size / 1024:,.1f} KiB"
        if size < 1 << 20
        else f"{size / (1 << 20):,.1f} MiB"
    )
