#!/usr/bin/env python3
"""Median synth time of the whole platform app against an empty CDK app.

Runs each app as `cdk synth` would (a fresh Python process with the CLI's context in
CDK_CONTEXT_JSON and an empty CDK_OUTDIR), alternating the two so machine noise hits both
alike. Budget: the whole app within 1.5x the empty app.

    .venv/bin/python scripts/bench_synth.py [--runs 5] [--no-nag]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EMPTY_APP = (
    "import aws_cdk as cdk\n"
    "app = cdk.App()\n"
    "cdk.Stack(app, 'Empty')\n"
    "app.synth()\n"
)


def run(argv: list[str], context: dict) -> float:
    with tempfile.TemporaryDirectory() as outdir:
        env = {
            **os.environ,
            "CDK_CONTEXT_JSON": json.dumps(context),
            "CDK_OUTDIR": outdir,
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        }
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-nag", action="store_true", help="skip cdk-nag in the platform app")
    args = parser.parse_args()
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    if args.no_nag:
        context["ml-platform:nag"] = False
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as empty:
        empty.write(EMPTY_APP)
    platform_times, empty_times = [], []
    try:
        for _ in range(args.runs):
            empty_times.append(run([sys.executable, empty.name], context))
            platform_times.append(run([sys.executable, str(ROOT / "app.py")], context))
    finally:
        os.unlink(empty.name)
    p, e = statistics.median(platform_times), statistics.median(empty_times)
    print(f"runs: {args.runs}")
    print(f"empty CDK app:  median {e:.2f} s  ({', '.join(f'{t:.2f}' for t in empty_times)})")
    print(f"whole platform: median {p:.2f} s  ({', '.join(f'{t:.2f}' for t in platform_times)})")
    print(f"ratio: {p / e:.2f}x (budget 1.50x)")


if __name__ == "__main__":
    main()
