"""The public API is documented: docstrings on every public construct and method, the README
table, the README example that runs as written, and the pdoc reference."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import ml_platform.constructs as constructs
from tests.helpers.doc_blocks import doc_block
from tests.support import ROOT

README = (ROOT / "README.md").read_text()


def _undocumented(cls: type) -> list[str]:
    missing = [] if inspect.getdoc(cls) and cls.__doc__ else [cls.__name__]
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        target = member.fget if isinstance(member, property) else member
        if isinstance(target, (classmethod, staticmethod)):
            target = target.__func__
        if callable(target) and not (target.__doc__ or "").strip():
            missing.append(f"{cls.__name__}.{name}")
    return missing


def test_every_public_construct_and_method_has_a_docstring() -> None:
    missing = [m for name in constructs.__all__ for m in _undocumented(getattr(constructs, name))]
    assert missing == []


def test_the_docstring_check_sees_a_missing_docstring() -> None:
    class Bare:
        def grant_thing(self) -> None:
            pass

    assert _undocumented(Bare) == ["Bare", "Bare.grant_thing"]


def test_readme_table_lists_every_public_construct_with_an_existing_example() -> None:
    rows = dict(re.findall(r"^\| `(\w+)` \| [^|]+ \| `([^`]+)` \|$", README, re.M))
    # A construct's props object is exported beside it and documented with it.
    props = {name for name in constructs.__all__ if name.endswith("Props")}
    assert set(rows) == set(constructs.__all__) - props
    assert {name.removesuffix("Props") for name in props} <= set(rows)
    for where in rows.values():
        assert (ROOT / where).exists(), where


def test_readme_own_app_synthesizes_as_written(tmp_path: Path) -> None:
    """The README's complete app: its cdk.json and app.py written into a folder, and its
    synth command run there by the real CDK CLI (node_modules/.bin on PATH, see
    tests/conftest.py) with this test session's Python as ``python3``."""
    section = README[README.index("## Use the constructs in your own CDK app") :]
    section = section.split("\n## ", 1)[0]
    (cdk_json,) = re.findall(r"```json\n(.*?)```", section, re.S)
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    (tmp_path / "cdk.json").write_text(cdk_json)
    (tmp_path / "app.py").write_text(code)
    venv_bin = Path(sys.executable).parent  # holds python3, as an activated venv would
    assert (venv_bin / "python3").exists()
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(venv_bin), os.environ["PATH"]]),
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "CDK_DISABLE_VERSION_CHECK": "true",
        "CI": "true",
    }
    block = doc_block("own-app")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.text],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = json.loads((tmp_path / "cdk.out" / "manifest.json").read_text())
    assert not manifest.get("missing"), "the example needs an AWS context lookup"
    template = json.loads((tmp_path / "cdk.out" / "Research.template.json").read_text())
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert {"AWS::EC2::VPC", "AWS::FSx::FileSystem"} <= kinds
    # Nothing but what the app meant to say: no jsii banner, no unconfigured-flags notice.
    assert "!!" not in done.stderr and "program.js" not in done.stderr, done.stderr
