"""Inference at scale: 60 endpoints, one of them listing 1,000 archives, synthesized once.

Before: an Output description joined every archive (cfn-lint E6011 past about 50 archives)
and more than about 45 endpoints failed with TooManyResourcesInStack.
"""

from __future__ import annotations

import json

import pytest
import yaml
from cfnlint.api import ManualArgs, lint_by_config

from ml_platform.stack_outputs import ENDPOINTS_PER_STACK, STACK_RESOURCE_LIMIT
from tests.support import ROOT, SynthesizedPlatform, synthesize

ENDPOINTS = 60
ARCHIVES = [f"ensemble_{i:04d}" for i in range(1000)]


@pytest.fixture(scope="module")
def scaled(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedPlatform:
    endpoints = [{"name": f"ep-{i:02d}"} for i in range(ENDPOINTS)]
    endpoints[0]["archives"] = ARCHIVES
    return synthesize(
        tmp_path_factory.mktemp("scaled"),
        {
            "features": {"training_cluster": False, "triton_on_eks": False},
            "inference": {"endpoints": endpoints},
        },
        nag=False,  # nag adds nothing per endpoint that the default app's nag test misses
    )


def _inference_templates(scaled: SynthesizedPlatform) -> dict[str, dict]:
    return {
        s.stack_name: json.loads((scaled.outdir / f"{s.stack_name}.template.json").read_text())
        for s in scaled.platform.inference_stacks
    }


def test_endpoints_spread_over_stacks_below_the_resource_limit(scaled: SynthesizedPlatform) -> None:
    templates = _inference_templates(scaled)
    assert list(templates) == ["MlPlatform-Inference", "MlPlatform-Inference2"]
    counts = {name: len(t["Resources"]) for name, t in templates.items()}
    assert all(count <= STACK_RESOURCE_LIMIT for count in counts.values()), counts
    endpoints = {
        name: sum(r["Type"] == "AWS::SageMaker::Endpoint" for r in t["Resources"].values())
        for name, t in templates.items()
    }
    assert endpoints == {"MlPlatform-Inference": 30, "MlPlatform-Inference2": 30}
    # Headroom: a full stack stays below 500 even if every endpoint gains one more resource
    # (the scaling guard's two custom resources took 2 of the 3 this kept before, the
    # endpoint's own log group a third; its key is shared per stack. Moving endpoints between
    # stacks would replace them, so ENDPOINTS_PER_STACK stays 30).
    per_endpoint = counts["MlPlatform-Inference2"] / ENDPOINTS_PER_STACK
    assert (per_endpoint + 1) * ENDPOINTS_PER_STACK < STACK_RESOURCE_LIMIT, per_endpoint
    # The second stack deploys after the first (and after storage).
    second = scaled.platform.inference_stacks[1]
    assert {d.stack_name for d in second.dependencies} == {
        "MlPlatform-Storage",
        "MlPlatform-Inference",
    }


def test_nothing_in_the_templates_lists_archives(scaled: SynthesizedPlatform) -> None:
    for name, template in _inference_templates(scaled).items():
        text = json.dumps(template)
        assert "ensemble_0999" not in text and "ensemble_0000" not in text, name
        for output in template.get("Outputs", {}).values():
            assert len(output.get("Description", "")) <= 1024
        assert len(template.get("Description", "")) <= 1024
    # CloudFormation quotas, "Template body size in an Amazon S3 object": 1 MB
    # (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html;
    # the older 460,800 bytes of the API reference is superseded). Measured on the file the CDK
    # CLI uploads, as written (indented), with room for 10% more per endpoint.
    for stack in scaled.platform.inference_stacks:
        size = (scaled.outdir / f"{stack.stack_name}.template.json").stat().st_size
        assert size * 1.1 < 1_000_000, (stack.stack_name, size)


def _sampled(scaled: SynthesizedPlatform, name: str, template: dict) -> dict:
    """The template with every resource except those of the endpoints between the first and
    the last of the stack: cfn-lint costs about 9 s of CPU per 330 resources, and the endpoints
    in between are the same resources as those kept (one construct, other names). Limits that
    grow with the count (resources, outputs, sizes) are asserted on the full templates above."""
    from aws_cdk import CfnElement

    stack = next(s for s in scaled.platform.inference_stacks if s.stack_name == name)
    middle = list(stack.endpoints.values())[1:-1]
    dropped = {
        stack.get_logical_id(c)
        for endpoint in middle
        for c in endpoint.node.find_all()
        if isinstance(c, CfnElement)
    }
    # The stack's dashboard draws every endpoint's alarms: it goes with them (its size and
    # widget count are asserted on the full templates).
    dashboard = stack.get_logical_id(stack.dashboard.dashboard.node.default_child)
    dropped.add(dashboard)
    resources = {k: v for k, v in template["Resources"].items() if k not in dropped}
    assert len(resources) < len(template["Resources"]) and dropped <= set(template["Resources"])
    outputs = {k: v for k, v in template["Outputs"].items() if dashboard not in json.dumps(v)}
    return {**template, "Resources": resources, "Outputs": outputs}


def test_one_dashboard_per_stack_holds_every_endpoint(scaled: SynthesizedPlatform) -> None:
    from tests.helpers.documented_metrics import dashboard_bodies, problems

    for name, template in _inference_templates(scaled).items():
        (body,) = dashboard_bodies(template).values()
        # 500 widgets per dashboard (CloudWatch's dashboard body structure page).
        assert len(body["widgets"]) == 30 * 11 <= 500, name
        headings = [w for w in body["widgets"] if w["type"] == "text"]
        assert len(headings) == 30
        assert problems(template) == []


def test_cfn_lint_passes_at_scale(scaled: SynthesizedPlatform, tmp_path) -> None:
    config = yaml.safe_load((ROOT / ".cfnlintrc.yaml").read_text()) or {}
    paths = []
    for name, template in _inference_templates(scaled).items():
        path = tmp_path / f"{name}.template.json"
        path.write_text(json.dumps(_sampled(scaled, name, template)))
        paths.append(str(path))
    findings = [
        f"{m.filename}: {m.rule.id} {m.message}"
        for m in lint_by_config(
            ManualArgs(
                templates=paths,
                ignore_checks=config.get("ignore_checks") or [],
                regions=["us-west-2"],
            )
        )
    ]
    assert findings == []
