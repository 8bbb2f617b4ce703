"""``mlp models retire NAME@VERSION``: delete archive versions no endpoint's settings use.

A version is in use when a setting names it exactly (``NAME@VERSION``), or names its logical
name (``NAME``) and it is that name's newest version. Every version given is checked first;
if any is missing or in use, nothing is deleted. On a versioned bucket (the platform's is) S3
keeps the bytes as a noncurrent version, so a retired archive can still be recovered.
"""

from __future__ import annotations

import argparse

from ml_platform.cli.archives import (
    list_archives,
    model_location,
    referenced_by,
    settings_references,
)
from ml_platform.cli.aws import CliError, Context, doc_summary
from ml_platform.triton.archive_names import parse_ref


def add_parser(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "retire",
        parents=parents,
        help="delete archive versions that no endpoint's settings reference",
        description=doc_summary(__doc__),
    )
    p.add_argument("versions", nargs="+", metavar="NAME@VERSION",
                   help="archive versions to delete, e.g. model_trt_python@v1a2b3c4d")
    p.set_defaults(run=run)


def run(ctx: Context, args: argparse.Namespace) -> int:
    problems: list[str] = []
    refs = []
    for text in args.versions:
        try:
            ref = parse_ref(text)
        except ValueError as error:
            problems.append(str(error))
            continue
        if ref.version is None:
            problems.append(f"{text}: name the version to retire (NAME@VERSION); "
                            "`mlp models list` shows them")
            continue
        refs.append(ref)
    if problems:
        raise CliError("refusing to retire:\n" + "\n".join(f"  - {p}" for p in problems))

    bucket, prefix = model_location(ctx)
    s3 = ctx.client("s3")
    logicals = sorted({r.logical for r in refs})
    stored = [a for name in logicals for a in list_archives(s3, bucket, prefix, logical=name)]
    keys = {a.key for a in stored}
    users = referenced_by(stored, settings_references(ctx.settings))
    for ref in refs:
        if ref.key not in keys:
            problems.append(f"{ref}: no such archive under s3://{bucket}/{prefix}")
        elif users.get(ref.key):
            problems.append(f"{ref}: in use by {', '.join(users[ref.key])} (settings name it, "
                            "or name its logical name and it is the newest version)")
    if problems:
        raise CliError("refusing to retire:\n" + "\n".join(f"  - {p}" for p in problems))
    for ref in refs:
        s3.delete_object(Bucket=bucket, Key=prefix + ref.key)
        print(f"retired s3://{bucket}/{prefix}{ref.key}")
    return 0
