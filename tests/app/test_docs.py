"""The public API is documented: docstrings on every public construct and method, the README
table, the README example that runs as written, and the pdoc reference."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

import ml_platform.constructs as constructs
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
    assert set(rows) == set(constructs.__all__)
    for where in rows.values():
        assert (ROOT / where).exists(), where


def test_readme_use_the_constructs_example_synthesizes_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    section = README[README.index("## Use the constructs in your own CDK app") :]
    (code,) = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    # Only the output folder differs from the text: jsii's Node process does not see env
    # changes made here, so new_app gets outdir= instead of CDK_OUTDIR.
    import ml_platform.app

    real_new_app = ml_platform.app.new_app
    monkeypatch.setattr(
        ml_platform.app, "new_app", lambda **kwargs: real_new_app(outdir=str(tmp_path), **kwargs)
    )
    exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert not manifest.get("missing"), "the example needs an AWS context lookup"
    template = json.loads((tmp_path / "Research.template.json").read_text())
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert {"AWS::EC2::VPC", "AWS::FSx::FileSystem"} <= kinds
