"""An upgrade from the last release deploys: today's templates against that release's.

The baseline (tests/upgrade/baseline/<version>/, written at release time by
scripts/upgrade_baseline.py) is what the last release synthesizes with cdk.json's settings.
Today's templates are the session synthesis (tests/conftest.py ``synth``). Every change the
checks (tests/upgrade/checks.py) find must be accepted by an entry of the upgrade guide,
CHANGELOG.md's "### Upgrading from <version>" section, that names a remedy: each ``####``
entry lists the findings it accepts as ``<!-- upgrade-check: accept <finding id> -->`` and has
a ``**Remedy**`` paragraph; ``<!-- upgrade-check: remedy-settings {...} -->`` names settings
that avoid its findings, and a synthesis with them shows that they do.

Observed: the templates (synthesized here and by the release). Taken from the sources: the
createOnlyProperties of each type (cfn-lint's bundled CloudFormation provider schemas), and
CloudFormation's rules on exports in use and on replacing custom-named resources (AWS
CloudFormation User Guide, "Exporting stack output values" and "Update behaviors of stack
resources").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from ml_platform.config import deep_merge
from tests.support import ROOT, SynthesizedPlatform, synthesize
from tests.upgrade.checks import Templates, breaking_changes, normalized_template

BASELINES = Path(__file__).resolve().parent / "baseline"
CHANGELOG = ROOT / "CHANGELOG.md"
_MARKER = re.compile(r"<!--\s*upgrade-check:\s*(accept|remedy-settings)\s+(.+?)\s*-->")


def last_release() -> tuple[str, Path]:
    """The newest baseline: (version, folder)."""
    folders = [p for p in BASELINES.iterdir() if p.is_dir()]
    newest = max(folders, key=lambda p: Version(p.name))
    return newest.name, newest


def baseline_templates(folder: Path) -> Templates:
    return {
        p.name.removesuffix(".template.json"): json.loads(p.read_text())
        for p in sorted(folder.glob("*.template.json"))
    }


def templates_of(synth: SynthesizedPlatform) -> Templates:
    return {
        p.name.removesuffix(".template.json").split("-", 1)[1]: normalized_template(
            json.loads(p.read_text())
        )
        for p in synth.template_paths()
    }


@dataclass
class Entry:
    title: str
    text: str
    accepts: set[str] = field(default_factory=set)
    remedy_settings: dict[str, Any] | None = None


def upgrade_entries(changelog: str, version: str) -> list[Entry]:
    """The ``####`` entries of the "### Upgrading from <version>" section."""
    lines = changelog.splitlines()
    start = next(
        (
            i
            for i, line in enumerate(lines)
            if re.match(rf"### Upgrading from {re.escape(version)}\b", line)
        ),
        None,
    )
    if start is None:
        return []
    section: list[str] = []
    for line in lines[start + 1 :]:
        if re.match(r"#{1,3} ", line):
            break
        section.append(line)
    entries: list[Entry] = []
    for line in section:
        if line.startswith("#### "):
            entries.append(Entry(title=line[5:].strip(), text=""))
        elif entries:
            entries[-1].text += line + "\n"
    for entry in entries:
        for kind, value in _MARKER.findall(entry.text):
            if kind == "accept":
                entry.accepts.add(value)
            else:
                entry.remedy_settings = json.loads(value)
    return entries


def test_an_upgrade_from_the_last_release_deploys(synth: SynthesizedPlatform) -> None:
    version, folder = last_release()
    findings = breaking_changes(baseline_templates(folder), templates_of(synth))
    entries = upgrade_entries(CHANGELOG.read_text(), version)
    accepted = {finding for entry in entries for finding in entry.accepts}
    unaccepted = [f.id for f in findings if f.id not in accepted]
    assert not unaccepted, (
        f"an upgrade from {version} breaks (tests/upgrade/checks.py says how): {unaccepted}. "
        "Avoid the change (keep the export or rule one more release, keep the logical ID or "
        "the create-only value), or add an entry to CHANGELOG.md under '### Upgrading from "
        f"{version}' with '<!-- upgrade-check: accept <id> -->' and a **Remedy** paragraph"
    )
    stale = sorted(accepted - {f.id for f in findings})
    assert not stale, f"CHANGELOG.md accepts breaks that no longer occur: {stale}"


def test_every_accepted_break_has_a_remedy() -> None:
    version, _ = last_release()
    for entry in upgrade_entries(CHANGELOG.read_text(), version):
        if entry.accepts:
            assert "**Remedy**" in entry.text, f"CHANGELOG.md entry {entry.title!r}: no **Remedy**"


def test_remedy_settings_avoid_their_breaks(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One synthesis with every entry's remedy settings: their findings are gone."""
    version, folder = last_release()
    entries = [e for e in upgrade_entries(CHANGELOG.read_text(), version) if e.remedy_settings]
    if not entries:
        pytest.skip(f"no remedy settings in the upgrade guide from {version}")
    overrides: dict[str, Any] = {}
    for entry in entries:
        overrides = deep_merge(overrides, entry.remedy_settings or {})
    remedied = synthesize(tmp_path_factory.mktemp("remedy.out"), overrides, nag=False)
    left = {f.id for f in breaking_changes(baseline_templates(folder), templates_of(remedied))}
    assert not {i for i in left if i.startswith("sg-rule-moved")}, left
    for entry in entries:
        assert not (entry.accepts & left), (
            f"CHANGELOG.md entry {entry.title!r}: its remedy settings {entry.remedy_settings} "
            f"leave {sorted(entry.accepts & left)}"
        )


def _warnings(stack: Any) -> list[str]:
    from aws_cdk.assertions import Annotations, Match

    return [
        str(w.entry.data)
        for w in Annotations.from_stack(stack).find_warning(
            "*", Match.string_like_regexp("bootstrap_creator_admin")
        )
    ]


def test_the_bootstrap_setting_warns_until_it_is_chosen(
    synth: SynthesizedPlatform, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """cdk.json leaves cluster.bootstrap_creator_admin unset: synthesis names the setting and
    what it does to a 0.1.0 cluster, and builds the cluster with false. Set, it is quiet."""
    stack = synth.platform.training_cluster
    (warning,) = _warnings(stack)
    assert "cluster.bootstrap_creator_admin is not set" in warning
    assert "CloudFormation refuses for the fixed name 'ml-platform'" in warning
    assert "[ack: ml-platform:bootstrapCreatorAdmin]" in warning
    cluster = synth.template_json("TrainingCluster")["Resources"]["Cluster9EE0221C"]
    assert cluster["Properties"]["AccessConfig"]["BootstrapClusterCreatorAdminPermissions"] is False
    chosen = synthesize(
        tmp_path_factory.mktemp("chosen.out"),
        {"cluster": {"bootstrap_creator_admin": False}, "features": {"inference": False}},
        nag=False,
    )
    assert _warnings(chosen.platform.training_cluster) == []
