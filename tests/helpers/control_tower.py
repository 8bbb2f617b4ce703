"""AWS Control Tower's proactive controls over the synthesized templates, as a CDK policy-
validation plugin.

The rules and the cfn-guard binary are those bundled in PyPI ``cdklabs-cdk-validator-cfnguard``
(the Control Tower rules as AWS publishes them, and cfn-guard 3.1.1; ``guard-version.json`` in
the package). Its own plugin class is not used: for some checks over a list (``x in [...]``) it
reports a violating resource with no logical id, and jsii cannot hand such a report to Python
("resourceLogicalId: A value is required"), nor can aws-cdk map it to a construct that an
acknowledgment could reach. This plugin runs the same binary with the same rules and arguments
(``validate --rules <dir> --data <template>... --output-format json --structured``) and reports
every resource under ``/Resources/<logical id>`` that a failing rule's checks name.

Accepted findings are acknowledged next to the resource they concern
(:func:`ml_platform.constructs._nag.acknowledge_controls`): aws-cdk suppresses them and lists them,
with their reasons, under ``suppressedViolations`` in ``validation-report.json``.
"""

from __future__ import annotations

import functools
import json
import platform
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii

from ml_platform.constructs._nag import GUARD_PLUGIN

_RESOURCE = re.compile(r"^/Resources/([^/]+)")
_ARCH = {"x86_64": "x86_64", "AMD64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
_SYSTEM = {"Linux": "ubuntu", "Darwin": "macos"}  # the package's own names for its binaries


@functools.cache
def bundle() -> Path:
    """The plugin package's bundled files (binary of this machine, Control Tower rules,
    ``guard-version.json``), unpacked once per machine and version from its jsii tarball."""
    import cdklabs.cdk_validator_cfnguard as plugin

    (tarball,) = (Path(plugin.__file__).parent / "_jsii").glob("*.jsii.tgz")
    binary = f"package/bin/{_SYSTEM[platform.system()]}/{_ARCH[platform.machine()]}/cfn-guard"
    out = Path(tempfile.gettempdir()) / f"ml-platform-{tarball.name.removesuffix('.jsii.tgz')}"
    if not (out / binary).exists():
        # Unpacked beside, then renamed into place: test workers running at once never see a
        # half-written binary (the rename fails for all but the first; theirs is discarded).
        staging = Path(tempfile.mkdtemp(prefix=f"{out.name}.", dir=out.parent))
        wanted = (binary, "package/rules/", "package/guard-version.json", "package/package.json")
        with tarfile.open(tarball) as archive:
            members = [m for m in archive.getmembers() if m.name.startswith(wanted)]
            archive.extractall(staging, members=members, filter="data")
        (staging / binary).chmod(0o755)
        try:
            staging.rename(out)
        except OSError:
            if not (out / binary).exists():  # a leftover without the binary: use this copy
                return staging / "package"
            shutil.rmtree(staging, ignore_errors=True)
    return out / "package"


def guard_binary() -> Path:
    return bundle() / "bin" / _SYSTEM[platform.system()] / _ARCH[platform.machine()] / "cfn-guard"


def rules_dir() -> Path:
    return bundle() / "rules" / "control-tower" / "cfn-guard"


def run_guard(templates: list[str]) -> list[dict[str, Any]]:
    """cfn-guard's structured JSON results, one per template (exit 19 means non-compliant)."""
    result = subprocess.run(
        [
            str(guard_binary()),
            "validate",
            "--rules",
            str(rules_dir()),
            *(arg for t in templates for arg in ("--data", t)),
            "--output-format",
            "json",
            "--show-summary",
            "none",
            "--structured",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode not in (0, 19):
        raise RuntimeError(f"cfn-guard exited {result.returncode}: {result.stderr[-2000:]}")
    parsed = json.loads(result.stdout)
    return parsed if isinstance(parsed, list) else [parsed]


def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def findings(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per failing rule and template: rule name, control message, and each resource's paths."""
    out = []
    for result in results:
        for entry in result.get("not_compliant") or []:
            rule = entry["Rule"]
            message = next(
                (v.strip() for k, v in _walk(rule) if k == "custom_message" and v), rule["name"]
            )
            resources: dict[str, list[str]] = {}
            for key, value in _walk(rule):
                match = _RESOURCE.match(value) if key == "path" and isinstance(value, str) else None
                if match:
                    paths = resources.setdefault(match.group(1), [])
                    if value not in paths:
                        paths.append(value)
            out.append(
                {
                    "rule": rule["name"],
                    "template": result["name"],
                    "message": message,
                    "resources": resources,
                }
            )
    return out


def _lines(message: str) -> tuple[str, str]:
    """The control's description and its [FIX] line."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    fix = next((line.removeprefix("[FIX]:").strip() for line in lines if "[FIX]" in line), "")
    description = next((line for line in lines if "[FIX]" not in line), message)
    return description, fix


PENDING: dict[str, str] = {}
"""Controls whose findings another change in progress fixes: reported as warnings (synthesis
goes on), each with the change that ends it. Remove an entry once its control passes."""


@jsii.implements(cdk.IPolicyValidationPluginBeta1)
class ControlTowerChecks:
    """Every bundled Control Tower rule over every template of the assembly. A finding fails
    synthesis (severity ``error``) unless acknowledged; a finding of a :data:`PENDING` control
    is a ``warning``."""

    @property
    def name(self) -> str:
        return GUARD_PLUGIN

    @property
    def version(self) -> str | None:
        return str(json.loads((bundle() / "package.json").read_text())["version"])

    @property
    def rule_ids(self) -> list[str] | None:
        return None

    def validate(
        self, context: cdk.IPolicyValidationContextBeta1
    ) -> cdk.PolicyValidationPluginReportBeta1:
        violations = []
        for finding in findings(run_guard(list(context.template_paths))):
            description, fix = _lines(finding["message"])
            pending = next((why for c, why in PENDING.items() if f"[{c}]" in description), None)
            violations.append(
                cdk.PolicyViolationBeta1(
                    rule_name=finding["rule"],
                    description=description + (f" PENDING: {pending}" if pending else ""),
                    fix=fix or None,
                    # aws-cdk fails synthesis on an unacknowledged violation of severity error
                    # (and on none without one, once anything is acknowledged).
                    severity="warning" if pending else "error",
                    violating_resources=[
                        cdk.PolicyViolatingResourceBeta1(
                            resource_logical_id=logical_id,
                            template_path=finding["template"],
                            locations=paths,
                        )
                        for logical_id, paths in finding["resources"].items()
                    ],
                )
            )
        return cdk.PolicyValidationPluginReportBeta1(success=not violations, violations=violations)
