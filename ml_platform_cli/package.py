"""``mlp models package``: build the ensemble archives with the model-repository builder.

Every ensemble asked for is described and checked first; if any has a problem, all
problems are listed and nothing is written. The image ensemble takes Inception v3 as ONNX; its
DALI pipeline ships as a Python-defined DALI model (``dali.py``), which the endpoint's own DALI
serializes when it loads the archive (no DALI is needed here).
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
from pathlib import Path

from ml_platform.sagemaker_images import TRITON_VERSIONS
from ml_platform.triton.kinds import KINDS
from ml_platform.triton.package_flags import default_tokenizer_dir
from ml_platform_cli.archives import version_archive
from ml_platform_cli.aws import CliError, Context, Subcommands, doc_summary

__all__ = ["add_parser", "default_tokenizer_dir", "run"]


def add_parser(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "package",
        parents=parents,
        help="build the image and text ensemble archives",
        description=doc_summary(__doc__),
    )
    p.add_argument(
        "--ensemble",
        choices=(*(kind.name for kind in KINDS), "all"),
        default="all",
        help="which archives to build (default: all)",
    )
    p.add_argument(
        "--out", default="dist/models", type=Path, help="output folder (default: dist/models)"
    )
    for kind in KINDS:
        kind.cli.package.add(p.add_argument_group(kind.cli.package_group))
    p.add_argument(
        "--triton-version",
        choices=TRITON_VERSIONS,
        help="Triton release that will serve the archives: checked against --execution-env "
        "and --tensorrt-version and recorded in each archive (default: inference.triton_version "
        "of the settings)",
    )
    p.set_defaults(run=run)


def _check_out_dir(out: Path) -> None:
    """``--out`` must be a folder we can write (or one we can create)."""
    import os

    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise CliError(f"--out {out}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise CliError(f"--out {out}: {existing} is not writable")


def run(ctx: Context, args: argparse.Namespace) -> int:
    if args.triton_version is None:
        args.triton_version = ctx.settings.inference.triton_version  # the endpoint's release
    with tempfile.TemporaryDirectory(prefix="mlp-package-") as scratch:
        args.scratch = scratch
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from ml_platform.triton import find_ensemble_problems, package

    _check_out_dir(args.out)
    wanted = [kind for kind in KINDS if args.ensemble in ("all", kind.name)]
    problems: list[str] = []
    specs = [kind.cli.package.spec(args, problems) for kind in wanted]
    built = [s for s in specs if s is not None]  # a builder that gave None added its problem
    for spec in built:
        problems.extend(f"{spec.archive_filename}: {p}" for p in find_ensemble_problems(spec))
    if problems:
        raise CliError("refusing to package:\n" + "\n".join(f"  - {p}" for p in problems))
    for spec in built:
        try:
            path = package(spec, args.out)
        except ValueError as error:  # a model file vanished since the check
            raise CliError(f"{spec.archive_filename}: {error}") from None
        from ml_platform.triton.archive_safety import ArchiveSafetyError, check_archive

        try:  # what `mlp models upload` and the Triton init container will require
            check_archive(path)
        except ArchiveSafetyError as error:
            path.unlink()
            raise CliError(f"refusing to package: {error}") from None
        path, stale = version_archive(path)  # <logical>-v<hash8>.tar.gz: immutable on S3
        with path.open("rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
        size = path.stat().st_size
        print(f"{path}  {size / 1024:.1f} KiB  sha256 {digest[:16]}  (ensemble {spec.name!r})")
        for old in stale:
            print(f"  removed the older version {old.name} from {old.parent}")
    return 0
