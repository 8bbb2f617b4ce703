"""``mlp models adopt``: take an archive built elsewhere (the AWS sample's ``model_tf_dali.tar.gz``,
an archive of your own) into ``--out`` under a versioned name, checked like the archives
``mlp models package`` builds.

The archive must be safe to unpack, hold exactly one ensemble whose wiring passes the ensemble
checker, and be loadable by the configured release (``inference.triton_version``: backends,
a plan's recorded TensorRT, an execution environment's Python) on the GPUs the settings give
it to. It is then copied to ``<out>/<name>-v<version>.tar.gz`` (the version is its content's),
ready for ``mlp models upload``: the sample's plain names are overwritten in place on S3, which
a multi-model endpoint may keep serving from its cache, while a versioned name is never reused.
The archive itself is not changed, so nothing is recorded inside it: ``mlp models list`` shows
what ``mlp models upload`` reads from its configs.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from ml_platform_cli.aws import CliError, Context, Subcommands, doc_summary


def add_parser(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "adopt",
        parents=parents,
        help="check an archive built elsewhere and give it a versioned name",
        description=doc_summary(__doc__),
    )
    p.add_argument("archive", type=Path, help="the .tar.gz archive to adopt")
    p.add_argument(
        "--name",
        help="logical archive name (default: the file name without .tar.gz), e.g. "
        "model_tf_dali_sample",
    )
    p.add_argument(
        "--out", default="dist/models", type=Path, help="output folder (default: dist/models)"
    )
    p.set_defaults(run=run)


def adopt_problems(path: Path, logical: str, settings: object) -> list[str]:
    """Every reason ``path`` (named ``<logical>.tar.gz``) cannot be adopted as ``logical``
    under ``settings``."""
    from ml_platform.triton.archive_names import logical_problem
    from ml_platform.triton.archive_safety import archive_safety_problems
    from ml_platform.triton.repository import archive_problems
    from ml_platform_cli.upload import gpu_target_problems, release_problems_of

    problems = []
    name_problem = logical_problem(logical)
    if name_problem:
        problems.append(f"--name: {name_problem}")
    if not path.is_file():
        return [*problems, f"{path}: not a file"]
    safety = archive_safety_problems(path)
    if safety:
        return problems + [f"{path}: {p}" for p in safety]
    problems += [f"{path}: {p}" for p in archive_problems(path)]
    problems += [f"{path}: {p}" for p in gpu_target_problems(path, settings)]
    problems += [f"{path}: {p}" for p in release_problems_of(path, settings)]
    return problems


def run(ctx: Context, args: argparse.Namespace) -> int:
    from ml_platform_cli.archives import version_archive

    source: Path = args.archive
    logical = args.name or source.name.removesuffix(".tar.gz")
    settings = ctx.settings
    with tempfile.TemporaryDirectory(prefix="mlp-adopt-") as scratch:
        # Checked and copied from one private copy: what is adopted is what was checked.
        copy = Path(scratch) / f"{logical}.tar.gz"
        if source.is_file():
            shutil.copyfile(source, copy)
        problems = adopt_problems(copy if source.is_file() else source, logical, settings)
        problems = [p.replace(str(copy), str(source)) for p in problems]
        if problems:
            raise CliError("refusing to adopt:\n" + "\n".join(f"  - {p}" for p in problems))
        args.out.mkdir(parents=True, exist_ok=True)
        target = args.out / f"{logical}.tar.gz"
        shutil.copyfile(copy, target)
    path, stale = version_archive(target)
    print(f"{path}  adopted from {source}")
    for old in stale:
        print(f"  removed the older version {old.name} from {old.parent}")
    return 0
