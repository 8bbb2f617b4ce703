"""Create order: every FSx file system and node group is created after the rules of the
security groups it uses (aws/aws-cdk#14431; FSx answers InvalidNetworkSettings otherwise,
aws/aws-parallelcluster#1198). The walk is described in tests/create_order.py."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

from tests.create_order import walk
from tests.support import SynthesizedPlatform


def _summary(outdir: Path) -> dict[tuple[str, str], tuple[int, dict[str, int], list[str]]]:
    return {
        (stack.split("-", 1)[1], kind): (len(f.groups), dict(Counter(f.rules.values())), f.problems)
        for f in walk(outdir)
        for stack, _, kind in [f.resource]
    }


def test_every_file_system_and_node_group_waits_for_its_rules(synth: SynthesizedPlatform) -> None:
    found = _summary(synth.outdir)
    assert {k: v[2] for k, v in found.items()} == {k: [] for k in found}
    # What the walk covers with cdk.json's settings (so it cannot pass by finding nothing):
    assert found == {
        # Lustre self rules (3 ingress + 2 egress: aws-cdk keeps both 988 self ingress rules)
        # and the 8 rules between the file system and its client group: all in DependsOn.
        ("Storage", "AWS::FSx::FileSystem"): (1, {"depends on": 13}, []),
        # System nodes: cluster group + Lustre client group. The Trainium nodes'
        # control-plane rules on the cluster group come later, for those nodes.
        ("TrainingCluster", "AWS::EKS::Nodegroup"): (
            2,
            {"earlier stack": 8, "later stack, to a group the resource does not use": 6},
            [],
        ),
        # Trainium nodes: EFA self rules (Network), Lustre client rules (Storage), control-plane
        # rules in their own stack (DependsOn).
        ("TrainiumNodes", "AWS::EKS::Nodegroup"): (2, {"earlier stack": 10, "depends on": 6}, []),
        # GPU nodes: no groups of their own (EKS attaches the cluster group).
        ("GpuNodes", "AWS::EKS::Nodegroup"): (0, {}, []),
    }


def test_the_walk_finds_a_file_system_created_before_its_rules(
    synth: SynthesizedPlatform, tmp_path: Path
) -> None:
    """Without the DependsOn (as before this fix) the walk reports each Lustre rule."""
    shutil.copytree(synth.outdir, tmp_path / "out")
    path = tmp_path / "out" / f"{synth.stack_name('Storage')}.template.json"
    template = json.loads(path.read_text())
    (fs,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::FSx::FileSystem"]
    fs.pop("DependsOn")
    path.write_text(json.dumps(template))
    problems = _summary(tmp_path / "out")[("Storage", "AWS::FSx::FileSystem")][2]
    assert len(problems) == 13 and all("is not in Lustre" in p for p in problems)
