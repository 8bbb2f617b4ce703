#!/usr/bin/env python3
"""Median synth time of the whole platform app against an empty CDK app.

Runs each app as `cdk synth` would (a fresh Python process with the CLI's context in
CDK_CONTEXT_JSON and an empty CDK_OUTDIR), alternating them so machine noise hits all alike.
Budget: the whole app within 1.5x the empty app (a default `cdk.App()` with one empty stack).

The platform app switches off aws-cdk-lib's built-in CloudFormation validation (cfn-lint
gates the templates in the tests instead; see ml_platform.app.new_app). So that the figure
hides nothing, the empty app is also timed with that validation off: the floor of any CDK
app on this machine.

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
    "import sys\n"
    "import aws_cdk as cdk\n"
    "app = cdk.App(builtin_cloud_formation_validation=sys.argv[1] == 'default')\n"
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
    platform_times, empty_times, floor_times = [], [], []
    try:
        for _ in range(args.runs):
            empty_times.append(run([sys.executable, empty.name, "default"], context))
            platform_times.append(run([sys.executable, str(ROOT / "app.py")], context))
            floor_times.append(run([sys.executable, empty.name, "no-cfn-validation"], context))
    finally:
        os.unlink(empty.name)
    p, e, f = (statistics.median(t) for t in (platform_times, empty_times, floor_times))
    show = lambda ts: ", ".join(f"{t:.2f}" for t in ts)  # noqa: E731
    print(f"runs: {args.runs}")
    print(f"empty CDK app (default):                median {e:.2f} s  ({show(empty_times)})")
    print(f"empty CDK app (no built-in validation): median {f:.2f} s  ({show(floor_times)})")
    print(f"whole platform:                         median {p:.2f} s  ({show(platform_times)})")
    print(f"ratio to the empty app: {p / e:.2f}x (budget 1.50x); above the floor: +{p - f:.2f} s")


if __name__ == "__main__":
    main()
