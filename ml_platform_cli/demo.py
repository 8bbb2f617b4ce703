"""``mlp models demo``: write demo models for both ensembles (DEMO WEIGHTS, NOT FOR
PRODUCTION), to try ``mlp models package`` and ``mlp models serve --local`` with nothing to
download.

What it writes and why the weights are meaningless: :mod:`ml_platform.triton.demo_models`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ml_platform_cli.aws import Context, Subcommands, doc_summary

DEFAULT_OUT = Path("build/demo")


def add_parser(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        parents=parents,
        help="write demo models (not for production) for both ensembles",
        description=doc_summary(__doc__),
    )
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"folder to write them into (default: {DEFAULT_OUT})",
    )
    p.set_defaults(run=run)


def run(ctx: Context, args: argparse.Namespace) -> int:
    from ml_platform.triton.demo_models import write_demo_inputs

    for path in write_demo_inputs(args.out):
        print(f"{path}  {path.stat().st_size / 1024:,.1f} KiB")
    print("demo weights, not for production: they exercise the path, their answers mean nothing")
    return 0
