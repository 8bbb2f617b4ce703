#!/usr/bin/env python3
"""Where one synth of the whole app spends its time: Python against Node, and the jsii traffic.

Runs ``app.py`` in this process as `cdk synth` would (cdk.json's context in CDK_CONTEXT_JSON,
an empty CDK_OUTDIR), counting every request sent to jsii's Node runtime by kind and timing
the ones that load an assembly (each extracts or hashes a package and runs its code in Node).
Then it prints the wall time, the CPU time of this Python process and of its Node children,
the requests by kind, the assembly loads, and the ``--top`` places in ``ml_platform`` (or
``app.py``) whose requests waited longest for Node.

    .venv/bin/python scripts/synth_profile.py [--top 15] [--no-nag]

One run, so its figures drift with the machine; `make bench` gives medians against the floor.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import json
import os
import resource
import runpy
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _caller() -> str:
    """The innermost frame of the platform's own code (``ml_platform`` or ``app.py``)."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if "/ml_platform/" in name or name == str(ROOT / "app.py"):
            where = name.split("/ml_platform/")[-1] if "/ml_platform/" in name else "app.py"
            return f"{where}:{frame.f_lineno} {frame.f_code.co_name}"
        frame = frame.f_back
    return "(outside the platform's code)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--no-nag", action="store_true", help="skip cdk-nag in the platform app")
    args = parser.parse_args()

    # Imported here: jsii starts nothing until the app imports a jsii library.
    from jsii._kernel.providers import process

    kinds: collections.Counter[str] = collections.Counter()
    waited: collections.defaultdict[str, float] = collections.defaultdict(float)
    sent: collections.Counter[str] = collections.Counter()
    loads: list[tuple[str, float]] = []
    send = process._NodeProcess.send

    def counted(self: Any, request: Any, response_type: Any) -> Any:
        where, start = _caller(), time.perf_counter()
        try:
            return send(self, request, response_type)
        finally:
            elapsed = time.perf_counter() - start
            kinds[type(request).__name__.removesuffix("Request").lstrip("_")] += 1
            waited[where] += elapsed
            sent[where] += 1
            if type(request).__name__ == "LoadRequest":
                loads.append((f"{request.name}@{request.version}", elapsed))

    process._NodeProcess.send = counted  # type: ignore[method-assign]

    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    if args.no_nag:
        context["ml-platform:nag"] = False
    outdir = tempfile.mkdtemp(prefix="synth-profile-")
    os.environ.update(CDK_CONTEXT_JSON=json.dumps(context), CDK_OUTDIR=outdir)
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    start = time.perf_counter()

    def report() -> None:
        # Runs after jsii's own exit hook (registered later, so run first) has stopped Node,
        # whose CPU time then counts among this process's children.
        wall = time.perf_counter() - start
        python, node = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
        print(f"wall {wall:.2f} s; CPU: Python {python:.2f} s, Node {node:.2f} s")
        print(
            f"jsii requests: {sum(kinds.values())} ({', '.join(f'{k} {n}' for k, n in kinds.most_common())})"
        )
        print("assembly loads (s): " + ", ".join(f"{name} {t:.2f}" for name, t in loads))
        print(f"waiting for Node (s), requests, where (top {args.top}):")
        for where, seconds in sorted(waited.items(), key=lambda x: -x[1])[: args.top]:
            print(f"  {seconds:6.2f} {sent[where]:5d}  {where}")

    atexit.register(report)
    sys.argv = [str(ROOT / "app.py")]
    runpy.run_path(str(ROOT / "app.py"), run_name="__main__")


if __name__ == "__main__":
    main()
