"""The create-order walk (tests/create_order.py) over the outside app: there the EFA group,
two Trainium node groups and two file systems share one stack, so every rule of their groups
must be reached through DependsOn."""

from __future__ import annotations

from collections import Counter

from tests.app.conftest import Outside
from tests.create_order import walk


def test_outside_app_creates_nothing_before_its_rules(outside: Outside) -> None:
    findings = walk(outside.outdir)
    assert [(f.resource, f.problems) for f in findings if f.problems] == []
    shared = {
        f.resource[1]: dict(Counter(f.rules.values()))
        for f in findings
        if f.resource[0] == "Shared"
    }
    assert shared == {
        # EFA self rules (2), the Lustre rules of both file systems to the EFA group
        # (ScratchA's clients) and control-plane rules (6): 16, all DependsOn.
        "TrnA59A81F32": {"depends on": 16},
        "TrnB708CE285": {"depends on": 16},
        # Lustre self (5), own client group (8), the EFA group or node group as client (4).
        "ScratchA571B8C1D": {"depends on": 17},
        "ScratchB58384DB7": {"depends on": 17},
        # Triton's GPU nodes carry no groups of their own.
        "TritonAGpuNodesDFB3DD73": {},
        "TritonBGpuNodes5CF8045D": {},
    }
