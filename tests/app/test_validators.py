"""Real validators over everything synthesized: cfn-lint and cdk-nag's AwsSolutions pack."""

from __future__ import annotations

import json

import pytest
import yaml
from cfnlint.api import ManualArgs, lint, lint_by_config

from ml_platform.constructs._nag import GUARD_PLUGIN
from tests.support import ROOT, SynthesizedPlatform


def _cfnlint_config(**kwargs) -> ManualArgs:
    config = yaml.safe_load((ROOT / ".cfnlintrc.yaml").read_text()) or {}
    return ManualArgs(
        ignore_checks=config.get("ignore_checks") or [], regions=["us-west-2"], **kwargs
    )


def test_every_stack_is_synthesized(synth: SynthesizedPlatform) -> None:
    names = {p.name.removesuffix(".template.json") for p in synth.template_paths()}
    assert {s.stack_name for s in synth.platform.stacks} <= names


def test_cfn_lint_finds_no_errors_or_warnings(synth: SynthesizedPlatform) -> None:
    paths = [str(p) for p in synth.template_paths()]
    assert paths
    findings = [
        f"{m.filename}: {m.rule.id} {m.message} ({m.path_string})"
        for m in lint_by_config(_cfnlint_config(templates=paths))
    ]
    assert findings == []


def test_cfn_lint_catches_a_broken_template() -> None:
    """The harness really lints: a template with a bad property fails."""
    broken = {"Resources": {"B": {"Type": "AWS::S3::Bucket", "Properties": {"Nope": 1}}}}
    assert [m.rule.id for m in lint(json.dumps(broken), config=_cfnlint_config())] == ["E3002"]


def test_cdk_nag_has_no_unacknowledged_findings(synth: SynthesizedPlatform) -> None:
    """cdk-nag's findings (Control Tower's, which the same synthesis runs: test_control_tower.py;
    its pending warnings do not fail synthesis)."""
    report = synth.nag_report()
    violations = [
        f"{v['ruleName']}: {[c['constructPath'] for c in v['violatingConstructs']]}"
        for plugin in report["pluginReports"]
        if plugin["pluginName"] != GUARD_PLUGIN
        for v in plugin.get("violations", [])
    ]
    assert synth.validation_error is None, violations
    assert violations == []


def test_cdk_nag_fails_synthesis_on_a_new_finding(tmp_path) -> None:
    """The plugin build_platform attaches really runs: an unlogged, TLS-optional bucket added to a
    platform stack fails synthesis with AwsSolutions findings."""
    from aws_cdk import aws_s3 as s3

    from ml_platform.app import build_platform, new_app, settings_from_app
    from tests.support import cdk_json_context

    app = new_app(outdir=str(tmp_path), context=cdk_json_context())
    platform = build_platform(app, settings_from_app(app))
    s3.Bucket(platform.storage, "Careless")
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    rules = {v["ruleName"] for p in report["pluginReports"] for v in p["violations"]}
    assert {"AwsSolutions-S1", "AwsSolutions-S10"} <= rules


def _acknowledgements(synth: SynthesizedPlatform) -> dict[str, str]:
    """Every cdk-nag acknowledgement in the app: '<construct path> <rule>' -> reason. (aws-cdk
    also acknowledges some of its own CloudFormation-Validate findings; those are not ours.)"""
    out = {}
    for construct in synth.platform.app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == "aws:cdk:acknowledged-rules":
                for rule, reason in entry.data.items():
                    if "AwsSolutions-" in rule:
                        out[f"{construct.node.path} {rule}"] = reason
    return out


def test_every_cdk_nag_acknowledgement_carries_a_reason(synth: SynthesizedPlatform) -> None:
    acknowledgements = _acknowledgements(synth)
    # The platform needs some (managed policies EKS requires, aws-cdk's kubectl provider, ...).
    assert len(acknowledgements) >= 10
    for where, reason in acknowledgements.items():
        assert len(reason.split()) >= 6, f"{where}: reason too thin: {reason!r}"
