"""The outside app, synthesized once per session with cdk-nag attached."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from cdk_nag import AwsSolutionsChecks

from ml_platform.app import new_app
from tests.helpers import outside_app
from tests.support import synth_collecting_nag


@dataclass
class Outside:
    app: cdk.App
    parts: dict[str, Any]
    outdir: Path
    validation_error: str | None

    def template(self, stack: str) -> dict[str, Any]:
        return json.loads((self.outdir / f"{stack}.template.json").read_text())

    def resources(self, stack: str, kind: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.template(stack)["Resources"].items() if r["Type"] == kind}

    def nag_violations(self) -> list[tuple[str, str]]:
        path = self.outdir / "validation-report.json"
        if not path.exists():
            return []
        report = json.loads(path.read_text())
        return [
            (v["ruleName"], c["constructPath"])
            for p in report["pluginReports"]
            for v in p.get("violations", [])
            for c in v["violatingConstructs"]
        ]


@pytest.fixture(scope="session")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Outside:
    outdir = tmp_path_factory.mktemp("outside.out")
    app = new_app(outdir=str(outdir))
    parts = outside_app.build(app)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    error = synth_collecting_nag(app)
    return Outside(app=app, parts=parts, outdir=outdir, validation_error=error)
