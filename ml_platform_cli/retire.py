"""``mlp models retire NAME@VERSION``: delete archive versions no endpoint's settings use.

A version is in use when a setting names it exactly (``NAME@VERSION``), or names its logical
name (``NAME``) and it is that name's newest version. Every version given is checked first;
if any is missing or in use, nothing is deleted. On a versioned bucket (the platform's is) S3
keeps the bytes as a noncurrent version, so a retired archive can still be recovered.

Settings are not the only callers: clients granted ``NAME-v*`` may still name an old version,
and endpoint instances that loaded it keep serving it from their cache after the object is
deleted (until memory or disk pressure unloads it, or the instance is replaced). So without
``--force`` the command also refuses the newest version of a name, and a version superseded
less than 24 hours ago (``--min-superseded-hours``). ``--force`` never deletes a version the
settings use.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

from ml_platform.triton.archive_names import ArchiveRef, parse_key, parse_ref
from ml_platform_cli.archives import (
    StoredArchive,
    list_archives,
    model_location,
    referenced_by,
    settings_references,
)
from ml_platform_cli.aws import CliError, Context, Subcommands, doc_summary

#: How long a version must have been superseded before it is retired without --force: a
#: day gives clients that still name it time to move, and the endpoint's instances time to
#: stop serving it. An instance keeps a loaded model in memory and on disk until it needs the
#: room ("cached models are unloaded and/or deleted from disk only when a container runs out
#: of memory or disk space"), and deleting the S3 object does not unload it:
#: https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-caching.html
#: https://docs.aws.amazon.com/sagemaker/latest/dg/add-models-to-endpoint.html
DEFAULT_MIN_SUPERSEDED_HOURS = 24.0


def add_parser(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "retire",
        parents=parents,
        help="delete archive versions that no endpoint's settings reference",
        description=doc_summary(__doc__),
    )
    p.add_argument(
        "versions",
        nargs="+",
        metavar="NAME@VERSION",
        help="archive versions to delete, e.g. model_trt_python_t4@v1a2b3c4d",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="also retire the newest version of a name, or one superseded recently "
        "(never one the settings use)",
    )
    p.add_argument(
        "--min-superseded-hours",
        type=float,
        default=DEFAULT_MIN_SUPERSEDED_HOURS,
        metavar="H",
        help="retire without --force only versions superseded at least "
        f"H hours ago (default: {DEFAULT_MIN_SUPERSEDED_HOURS:g})",
    )
    p.set_defaults(run=run)


def _now() -> datetime:
    return datetime.now(UTC)


def _parse(text: str) -> ArchiveRef:
    """``NAME@VERSION``; an object key or S3 URI as upload prints it gets a hint."""
    try:
        return parse_ref(text)
    except ValueError as error:
        key = parse_key(text.rsplit("/", 1)[-1])
        if key is not None:
            raise ValueError(f"{text!r} is an object key; name the version as {key}") from None
        raise ValueError(f"{error}, e.g. model_trt_python_t4@v1a2b3c4d") from None


def recency_problem(
    ref: ArchiveRef, versions: list[StoredArchive], now: datetime, min_superseded: timedelta
) -> str | None:
    """Why retiring ``ref`` needs ``--force``: it is the newest of ``versions`` (its logical
    name's stored versions), or the version after it is younger than ``min_superseded``."""
    mine = next(a for a in versions if a.key == ref.key)
    later = sorted(
        (a for a in versions if a.last_modified > mine.last_modified), key=lambda a: a.last_modified
    )
    if not later:  # a LastModified tie for the newest counts as the newest
        return (
            f"{ref}: the newest version of {ref.logical}: clients granted "
            f"{ref.logical}-v* and endpoint instances that cached it may still use it; "
            "pass --force to retire it anyway"
        )
    successor = later[0]
    age = now - successor.last_modified
    if age < min_superseded:
        hours = max(age.total_seconds(), 0) / 3600
        return (
            f"{ref}: superseded by {successor.ref} only {hours:.1f} h ago (less than "
            f"--min-superseded-hours {min_superseded.total_seconds() / 3600:g}); clients "
            "and cached instances may still use it; pass --force to retire it anyway"
        )
    return None


def run(ctx: Context, args: argparse.Namespace) -> int:
    if not args.min_superseded_hours >= 0:
        raise CliError(f"--min-superseded-hours {args.min_superseded_hours:g}: expected 0 or more")
    problems: list[str] = []
    refs = []
    for text in args.versions:
        try:
            ref = _parse(text)
        except ValueError as error:
            problems.append(str(error))
            continue
        if ref.version is None:
            problems.append(
                f"{text}: name the version to retire (NAME@VERSION); `mlp models list` shows them"
            )
            continue
        refs.append(ref)
    if problems:
        raise CliError("refusing to retire:\n" + "\n".join(f"  - {p}" for p in problems))

    bucket, prefix = model_location(ctx)
    s3 = ctx.client("s3")
    logicals = sorted({r.logical for r in refs})
    by_logical = {name: list_archives(s3, bucket, prefix, logical=name) for name in logicals}
    stored = [a for versions in by_logical.values() for a in versions]
    keys = {a.key for a in stored}
    users = referenced_by(stored, settings_references(ctx.settings))
    now, min_superseded = _now(), timedelta(hours=args.min_superseded_hours)
    for ref in refs:
        if ref.key not in keys:
            problems.append(f"{ref}: no such archive under s3://{bucket}/{prefix}")
        elif users.get(ref.key):
            problems.append(
                f"{ref}: in use by {', '.join(users[ref.key])} (settings name it, "
                "or name its logical name and it is the newest version)"
            )
        elif not args.force:
            problem = recency_problem(ref, by_logical[ref.logical], now, min_superseded)
            if problem:
                problems.append(problem)
    if problems:
        raise CliError("refusing to retire:\n" + "\n".join(f"  - {p}" for p in problems))
    for ref in refs:
        s3.delete_object(Bucket=bucket, Key=prefix + ref.key)
        print(f"retired s3://{bucket}/{prefix}{ref.key}")
    return 0
