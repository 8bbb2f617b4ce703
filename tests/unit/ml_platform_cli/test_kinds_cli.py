"""mlp models package and mlp invoke offer every ensemble kind of the table
(ml_platform.triton.kinds) by its flags."""

from __future__ import annotations

import argparse
from pathlib import Path

from ml_platform.triton.kinds import IMAGE, KINDS, TEXT
from ml_platform_cli import invoke, package


def _subparser(module: object, name: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    module.add_parser(sub, [])  # type: ignore[attr-defined]
    found: argparse.ArgumentParser = sub.choices[name]
    return found


def test_package_offers_each_kind_with_its_flag_group() -> None:
    parser = _subparser(package, "package")
    (ensemble,) = [a for a in parser._actions if a.dest == "ensemble"]
    assert list(ensemble.choices or ()) == [*(k.name for k in KINDS), "all"]
    titles = [group.title for group in parser._action_groups]
    assert [k.cli.package_group for k in KINDS] == [t for t in titles if t and "ensemble (" in t]


def test_invoke_takes_each_kind_by_its_flag(tmp_path: Path) -> None:
    parser = _subparser(invoke, "invoke")
    image = tmp_path / "x.jpg"
    image.write_bytes(b"\xff\xd8")
    assert parser.parse_args(["--image", str(image)]).image == image
    assert parser.parse_args(["--text", "a", "--text", "b"]).text == ["a", "b"]
    for kind in KINDS:
        assert f"--{kind.name}" in parser.format_help()
    inputs, outputs = invoke.kind_tensors(TEXT, ["a", "b"])
    assert [(t.name(), t.datatype(), t.shape()) for t in inputs] == [("INPUT0", "BYTES", [2, 1])]
    assert [o.name() for o in outputs] == [TEXT.output.name]
    inputs, _ = invoke.kind_tensors(IMAGE, b"\xff\xd8\xff")
    assert [(t.name(), t.datatype(), t.shape()) for t in inputs] == [("INPUT", "UINT8", [1, 3])]
