"""`make bench` (scripts/bench_synth.py) times the floor, an empty app, as a true empty app: run
outside the project, cdk.json's feature flags do not reach it (one of them,
``validateAgainstDefaultRules``, made the default empty app fail on its empty stack)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.support import ROOT

SCRIPT = ROOT / "scripts" / "bench_synth.py"
_spec = importlib.util.spec_from_file_location("bench_synth", SCRIPT)
assert _spec and _spec.loader
bench_synth = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_synth)


@pytest.mark.parametrize("validation", [True, False], ids=["default", "floor"])
def test_the_empty_apps_synthesize_outside_the_project(tmp_path: Path, validation: bool) -> None:
    app = tmp_path / "empty_app.py"
    app.write_text(bench_synth.EMPTY_APP)
    wall, cpu = bench_synth.run_empty(app, validation=validation)
    assert wall > 0 and cpu > 0
