"""AWS Control Tower's proactive controls (Guard rules and cfn-guard from PyPI
``cdklabs-cdk-validator-cfnguard``, run by tests/helpers/control_tower.py) over every template of
the session synthesis: no finding is left unless acknowledged beside its resource with a reason,
and no acknowledgment outlives its finding.

Observed: cfn-guard's verdicts on the synthesized templates and aws-cdk's suppression report.
Taken from the package: the rules themselves (AWS's Control Tower controls)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import CfnResource
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms

from ml_platform.app import new_app
from ml_platform.constructs._kms import restrict_grants
from ml_platform.constructs._nag import CONTROL_RULES, GUARD_PLUGIN
from tests.helpers.control_tower import PENDING, ControlTowerChecks, bundle, rules_dir
from tests.support import SynthesizedPlatform


def _guard_report(outdir: Path) -> dict[str, Any]:
    path = outdir / "validation-report.json"
    reports = json.loads(path.read_text())["pluginReports"] if path.exists() else []
    return next((p for p in reports if p["pluginName"] == GUARD_PLUGIN), {})


def _acknowledgments(app: cdk.App) -> dict[str, tuple[Any, str, str]]:
    """Every Control Tower acknowledgment: '<path> <rule>' -> (construct, rule, reason)."""
    out = {}
    for construct in app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == "aws:cdk:acknowledged-rules":
                for rule, reason in entry.data.items():
                    if rule.startswith(f"{GUARD_PLUGIN}::"):
                        out[f"{construct.node.path} {rule}"] = (construct, rule, reason)
    return out


def test_no_unacknowledged_finding_but_the_pending_ones(synth: SynthesizedPlatform) -> None:
    report = _guard_report(synth.outdir)
    assert report, "the Control Tower plugin reported nothing (not run?)"
    open_findings = [
        (v["ruleName"], v["severity"], [c["constructPath"] for c in v["violatingConstructs"]])
        for v in report["violations"]
        if not any(f"PENDING: {why}" in v["description"] for why in PENDING.values())
    ]
    assert open_findings == []
    assert synth.validation_error is None


def test_pending_controls_warn_on_the_endpoint_alarms_only(synth: SynthesizedPlatform) -> None:
    """CT.CLOUDWATCH.PR.1 stays open until issue 31's alarm topic: its findings are warnings and
    concern the endpoint alarms, nothing else."""
    pending = [
        v for v in _guard_report(synth.outdir)["violations"] if "PENDING" in v["description"]
    ]
    for violation in pending:
        assert violation["severity"] == "warning"
        for construct in violation["violatingConstructs"]:
            assert re.fullmatch(r".*-Inference/\w+/\w+Alarm/Resource", construct["constructPath"])


def test_each_acknowledgment_is_on_one_resource_and_still_needed(
    synth: SynthesizedPlatform,
) -> None:
    """Scoped: on a resource's construct (a CfnResource, or the L2 whose default child is one),
    never a stack or a group of resources. Used: a suppressed finding of that rule names that
    construct (a stale one fails, as stale checkov exceptions fail `make scan`)."""
    acknowledgments = _acknowledgments(synth.platform.app)
    assert len(acknowledgments) >= 12
    suppressed = {
        (v["acknowledgedAt"], v["acknowledgedId"])
        for v in _guard_report(synth.outdir).get("suppressedViolations", [])
    }
    for where, (construct, rule, reason) in acknowledgments.items():
        resource = construct if isinstance(construct, CfnResource) else construct.node.default_child
        assert isinstance(resource, CfnResource), f"{where}: not on a resource"
        assert len(reason.split()) >= 12, f"{where}: reason too thin: {reason!r}"
        assert (construct.node.path, rule) in suppressed, f"{where}: acknowledges nothing"


def test_the_acknowledged_controls_are_the_bundled_rules() -> None:
    """Each control id the code acknowledges names the Guard rule that implements it in the
    package's Control Tower rule files (the control id is in the rule's message)."""
    texts = [p.read_text() for p in rules_dir().rglob("*.guard")]
    assert len(texts) > 200  # 237 in 0.0.62
    for control, rule in CONTROL_RULES.items():
        assert any(f"rule {rule} " in t and f"[{control}]:" in t for t in texts), control
    assert json.loads((bundle() / "guard-version.json").read_text())["version"] == "3.1.1"


def test_a_new_finding_fails_synthesis_and_restricted_grants_pass(tmp_path: Path) -> None:
    """The plugin really runs: a key without the grant restriction and a subnet that assigns
    public addresses fail synthesis, named by resource; a key given :func:`restrict_grants`
    passes CT.KMS.PR.3. (One small app: the platform's own synthesis is the session's.)"""
    app = new_app(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Tiny", env=cdk.Environment(account="111122223333", region="us-west-2"))
    cdk.Validations.of(app).add_plugins(ControlTowerChecks())
    kms.Key(stack, "Bare")
    restrict_grants(kms.Key(stack, "Restricted"))
    ec2.CfnSubnet(
        stack, "Open", vpc_id="vpc-1", cidr_block="10.0.0.0/24", map_public_ip_on_launch=True
    )
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    found = {
        (v["ruleName"], c["constructPath"])
        for v in _guard_report(tmp_path)["violations"]
        for c in v["violatingConstructs"]
    }
    assert ("kms_create_grant_aws_service_check", "Tiny/Bare/Resource") in found
    assert ("subnet_auto_assign_public_ip_disabled_check", "Tiny/Open") in found
    assert ("kms_create_grant_aws_service_check", "Tiny/Restricted/Resource") not in found
