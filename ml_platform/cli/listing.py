"""``mlp models list``: every archive under the model prefix, with its version, size, upload
time and the endpoints whose settings reference it.

A logical name in the settings references its newest version; ``NAME@VERSION`` that version.
Every page of the listing is read (S3 returns at most 1,000 keys per page).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC
from typing import Any

from ml_platform.cli.archives import (
    StoredArchive,
    list_archives,
    model_location,
    referenced_by,
    settings_references,
)
from ml_platform.cli.aws import Context, Subcommands, doc_summary


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
    bucket, prefix = model_location(ctx)
    archives = list_archives(ctx.client("s3"), bucket, prefix)
    references = referenced_by(archives, settings_references(ctx.settings))
    rows = [_row(a, references.get(a.key, [])) for a in archives]
    rows.sort(key=lambda r: (r["logical"], r["last_modified"], r["key"]), reverse=False)
    return {"bucket": bucket, "prefix": prefix, "archives": rows}


def _row(archive: StoredArchive, consumers: list[str]) -> dict[str, Any]:
    ref = archive.ref
    return {
        "key": archive.key,
        "logical": ref.logical if ref else archive.key.removesuffix(".tar.gz"),
        "version": ref.version if ref else None,
        "size": archive.size,
        "last_modified": archive.last_modified.astimezone(UTC).isoformat(),
        "referenced_by": consumers,
    }


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
    for column in ("Archive", "Version", "Size", "Uploaded (UTC)", "Referenced by"):
        table.add_column(column, justify="right" if column == "Size" else "left")
    for row in rows:
        table.add_row(
            row["logical"],
            row["version"] or "(unversioned)",
            _size(row["size"]),
            row["last_modified"][:19].replace("T", " "),
            ", ".join(row["referenced_by"]) or "-",
        )
    console.print(table)
    return 0


def _size(size: int) -> str:
    return (
        f"{size:,} B"
        if size < 1024
        else f"{size / 1024:,.1f} KiB"
        if size < 1 << 20
        else f"{size / (1 << 20):,.1f} MiB"
    )
