"""Helpers for synthesizing the platform in tests (imported by conftest and test modules)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template

from ml_platform.app import Platform, build_platform, new_app, settings_from_app
from ml_platform.config import CONTEXT_KEY, deep_merge

ROOT = Path(__file__).resolve().parent.parent
CDK_JSON = ROOT / "cdk.json"


def cdk_json_context() -> dict[str, Any]:
    """The context `cdk synth` would see from this repository's cdk.json."""
    return json.loads(CDK_JSON.read_text())["context"]


@dataclass
class SynthesizedPlatform:
    """One synthesis of the platform: the stacks, their templates and cdk-nag's verdict."""

    platform: Platform
    outdir: Path
    validation_error: str | None
    _templates: dict[str, dict[str, Any]] = field(default_factory=dict)

    def stack_name(self, short: str) -> str:
        return f"{self.platform.settings.env.stack_prefix}-{short}"

    def template_json(self, short: str) -> dict[str, Any]:
        if short not in self._templates:
            path = self.outdir / f"{self.stack_name(short)}.template.json"
            self._templates[short] = json.loads(path.read_text())
        return self._templates[short]

    def template(self, short: str) -> Template:
        return Template.from_json(self.template_json(short))

    def template_paths(self) -> list[Path]:
        return sorted(self.outdir.glob("*.template.json"))

    def warnings(self, short: str) -> dict[str, list[str]]:
        """The synthesis warnings of stack ``short``, by construct path (its metadata file)."""
        path = self.outdir / f"{self.stack_name(short)}.metadata.json"
        return {
            construct: [str(e["data"]) for e in entries if e["type"] == "aws:cdk:warning"]
            for construct, entries in json.loads(path.read_text()).items()
            if any(e["type"] == "aws:cdk:warning" for e in entries)
        }

    def asset_folders(self, short: str) -> list[Path]:
        """The folders stack ``short`` ships as zipped file assets (its assets manifest)."""
        path = self.outdir / f"{self.stack_name(short)}.assets.json"
        return [
            self.outdir / a["source"]["path"]
            for a in json.loads(path.read_text())["files"].values()
            if a["source"].get("packaging") == "zip"
        ]

    def nag_report(self) -> dict[str, Any]:
        path = self.outdir / "validation-report.json"
        return json.loads(path.read_text()) if path.exists() else {"pluginReports": []}


def synthesize(
    outdir: Path,
    overrides: dict[str, Any] | None = None,
    *,
    nag: bool = True,
    control_tower: bool = False,
    volcano_chart_dir: str | None = None,
    neuron_chart_dir: str | None = None,
) -> SynthesizedPlatform:
    """Synthesize the app as `cdk synth` would, with ``overrides`` merged into the
    ``ml-platform`` context of cdk.json. ``control_tower``: also run AWS Control Tower's
    proactive controls (tests/helpers/control_tower.py); their verdict joins cdk-nag's.
    ``volcano_chart_dir``, ``neuron_chart_dir``: verified chart folders (``mlp charts fetch``),
    as ``app.py`` passes them."""
    context = cdk_json_context()
    if overrides:
        context[CONTEXT_KEY] = deep_merge(context.get(CONTEXT_KEY, {}), overrides)
    app = new_app(outdir=str(outdir), context=context)
    platform = build_platform(
        app,
        settings_from_app(app),
        nag=nag,
        volcano_chart_dir=volcano_chart_dir,
        neuron_chart_dir=neuron_chart_dir,
    )
    if control_tower:
        from tests.helpers.control_tower import ControlTowerChecks

        cdk.Validations.of(app).add_plugins(ControlTowerChecks())
    return SynthesizedPlatform(
        platform=platform, outdir=outdir, validation_error=synth_collecting_nag(app)
    )


def synth_collecting_nag(app: cdk.App) -> str | None:
    """Synthesize ``app``; return cdk-nag's ValidationFailed message, or ``None`` when clean.

    Any other synthesis error is raised as it is.
    """
    try:
        app.synth()
    except RuntimeError as exc:  # cdk-nag findings surface as ValidationFailed
        if "ValidationFailed" not in str(exc):
            raise
        return str(exc)
    return None


_HASH = re.compile(r"\b[0-9a-f]{64}\b")


def normalized(template: dict[str, Any]) -> dict[str, Any]:
    """A template with asset hashes replaced, so snapshots change only with behaviour."""
    return json.loads(_HASH.sub("<asset-hash>", json.dumps(template, sort_keys=True)))


#: The key-policy statement of Control Tower CT.KMS.PR.3 every platform key carries, written out
#: as the control's Guard rule demands it (Deny kms:CreateGrant to "*" under BoolIfExists with
#: kms:GrantIsForAWSResource and aws:PrincipalIsAWSService both "false").
GRANTS_ONLY_FOR_AWS_RESOURCES = {
    "Sid": "GrantsOnlyForAwsResources",
    "Action": "kms:CreateGrant",
    "Condition": {
        "BoolIfExists": {
            "kms:GrantIsForAWSResource": "false",
            "aws:PrincipalIsAWSService": "false",
        }
    },
    "Effect": "Deny",
    "Principal": {"AWS": "*"},
    "Resource": "*",
}
