#!/usr/bin/env python3
"""Median synth time (wall and CPU) of the whole platform app against the floor.

Runs each app as `cdk synth` would (a fresh Python process with the CLI's context in
CDK_CONTEXT_JSON and an empty CDK_OUTDIR), alternating them so machine noise hits all alike,
and then through the real CDK CLI (`npx cdk synth`), which adds Node's start and the CLI's
own work. CPU is user+system time of the process and its children (the jsii Node runtime).
Budget: the whole app within 3.5x the floor, by the median of the ratios of runs made back to
back (wall and CPU), which machine drift over the run does not move the way it moves separate
medians.

The floor is an empty app (a `cdk.App()` with one empty stack) with aws-cdk-lib's built-in
CloudFormation validation off, as the platform app has it (cfn-lint gates the templates in the
tests instead; see ml_platform.app.new_app): the least any CDK app costs on this machine. The
empty apps run outside the project, with no context: cdk.json's feature flags are the
platform's, and `@aws-cdk/core:validateAgainstDefaultRules` turns the built-in validation's
finding on an empty stack ("Resources section must exist and be non-empty") into an error. The
default empty app (built-in validation on) is timed too, to show what that validation costs.

    .venv/bin/python scripts/bench_synth.py [--runs 5] [--no-nag] [--baseline DIR]

``--baseline DIR`` (``make bench BASELINE=DIR``) also times another checkout's app (say
``git worktree add /tmp/before <commit>``), run by the same interpreter from DIR with DIR's
``cdk.json`` context, in turn with this one: "before and after in one run". Its row is added
and the ratio of each pair (this app over the baseline's, run back to back) is reported by its
median, which machine drift over the run does not move the way it moves separate medians.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
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


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


BUDGET = 3.5
"""The whole app's synth time over the floor's, at most (issue #37)."""


def run(argv: list[str], context: dict, cwd: Path = ROOT) -> tuple[float, float]:
    """(wall, CPU) seconds of one synth (the app's modules imported from ``cwd``)."""
    with tempfile.TemporaryDirectory() as outdir:
        env = {
            **os.environ,
            "CDK_CONTEXT_JSON": json.dumps(context),
            "CDK_OUTDIR": outdir,
            "PYTHONPATH": str(cwd),
        }
        cpu, start = _cpu(), time.perf_counter()
        # Its warnings (the default empty app's on its empty stack) only when it fails.
        done = subprocess.run(
            argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        elapsed = time.perf_counter() - start, _cpu() - cpu
        if done.returncode:
            sys.stderr.buffer.write(done.stderr)
            done.check_returncode()
        return elapsed


def run_empty(app: Path, validation: bool) -> tuple[float, float]:
    """(wall, CPU) seconds of the empty app ``app`` (:data:`EMPTY_APP`), built-in validation
    on or off, run outside the project with no context (see the module's docstring)."""
    argv = [sys.executable, str(app), "default" if validation else "no-cfn-validation"]
    return run(argv, {}, Path(tempfile.gettempdir()))


def _compile(root: Path) -> None:
    """Write the bytecode of ``root``'s app and package first. A synth writes it on its first
    run, but not where PYTHONDONTWRITEBYTECODE is set (as on this machine): each timed run
    would then compile every module whose cached bytecode is stale, and one checkout would
    pay for that and the other not."""
    compileall.compile_dir(root / "ml_platform", quiet=1)
    compileall.compile_file(root / "app.py", quiet=1)


def _context(root: Path, no_nag: bool) -> dict:
    context = json.loads((root / "cdk.json").read_text())["context"]
    if no_nag:
        context["ml-platform:nag"] = False
    return context


def run_cli(app: str | None, nag: bool) -> tuple[float, float]:
    """(wall, CPU) seconds of `npx cdk synth --quiet`: the app of cdk.json, or ``app`` run
    outside the project (in the output folder, so without cdk.json's context)."""
    with tempfile.TemporaryDirectory() as outdir:
        # The project's CLI by its path: `npx cdk` outside the project would fetch one.
        argv = [str(ROOT / "node_modules" / ".bin" / "cdk"), "synth", "--quiet", "--output", outdir]
        if app:
            argv += ["--app", app]
        if not nag:
            argv += ["-c", "ml-platform:nag=false"]
        env = {
            **os.environ,
            "CDK_DISABLE_VERSION_CHECK": "1",
        }
        cpu, start = _cpu(), time.perf_counter()
        subprocess.run(
            argv,
            cwd=outdir if app else ROOT,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return time.perf_counter() - start, _cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cli-runs", type=int, default=3)
    parser.add_argument("--no-nag", action="store_true", help="skip cdk-nag in the platform app")
    parser.add_argument(
        "--baseline", type=Path, help="another checkout whose app is timed in turn with this one"
    )
    args = parser.parse_args()
    context = _context(ROOT, args.no_nag)
    baseline = args.baseline.resolve() if args.baseline else None
    if baseline is not None and not (baseline / "app.py").is_file():
        parser.error(f"--baseline {args.baseline}: no app.py there (a checkout of this repo?)")
    base_context = _context(baseline, args.no_nag) if baseline else {}
    for root in (ROOT, baseline) if baseline else (ROOT,):
        _compile(root)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as empty:
        empty.write(EMPTY_APP)
    rows: dict[str, list[tuple[float, float]]] = {
        "empty CDK app (default)": [],
        "floor: empty app, no built-in validation": [],
        "whole platform": [],
        "npx cdk synth, floor": [],
        "npx cdk synth, whole platform": [],
    }
    names = list(rows)
    before = "whole platform, baseline"
    if baseline is not None:
        rows[before] = []
    try:
        for _ in range(args.runs):
            rows[names[0]].append(run_empty(Path(empty.name), validation=True))
            rows[names[2]].append(run([sys.executable, str(ROOT / "app.py")], context))
            if baseline is not None:
                app = [sys.executable, str(baseline / "app.py")]
                rows[before].append(run(app, base_context, baseline))
            rows[names[1]].append(run_empty(Path(empty.name), validation=False))
        for _ in range(args.cli_runs):
            rows[names[3]].append(
                run_cli(f"{sys.executable} {empty.name} no-cfn-validation", not args.no_nag)
            )
            rows[names[4]].append(run_cli(None, not args.no_nag))
    finally:
        os.unlink(empty.name)
    med = {
        name: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
        for name, v in rows.items()
        if v
    }
    print(f"runs: {args.runs} (app alone), {args.cli_runs} (npx cdk synth); median seconds")
    print(f"| {'what':<42} | wall | CPU | wall vs floor | CPU vs floor |")
    print("|---|---|---|---|---|")
    for name, (wall, cpu) in med.items():
        floor = med[names[3]] if name.startswith("npx") else med[names[1]]
        print(
            f"| {name:<42} | {wall:.2f} | {cpu:.2f} | {wall / floor[0]:.2f}x | "
            f"{cpu / floor[1]:.2f}x |"
        )
    # Each run of the whole app against the floor's run right after it.
    pairs = list(zip(rows[names[2]], rows[names[1]], strict=True))
    wall = statistics.median(a[0] / b[0] for a, b in pairs)
    cpu = statistics.median(a[1] / b[1] for a, b in pairs)
    print(
        f"whole platform vs the floor: median of {len(pairs)} pairs {wall:.2f}x wall, "
        f"{cpu:.2f}x CPU (budget {BUDGET:.2f}x); above the floor: "
        f"+{med[names[2]][0] - med[names[1]][0]:.2f} s wall"
    )
    if baseline is not None:
        pairs = list(zip(rows[names[2]], rows[before], strict=True))
        wall = statistics.median(a[0] / b[0] for a, b in pairs)
        cpu = statistics.median(a[1] / b[1] for a, b in pairs)
        print(
            f"whole platform vs the baseline {baseline}: median of {len(pairs)} pairs "
            f"{wall:.3f}x wall, {cpu:.3f}x CPU (above 1: slower)"
        )


if __name__ == "__main__":
    main()
