"""`mlp completion`: the script shtab generates from mlp's parser, sourced in a real bash and
asked what it completes; and the help's group titles name archives as packaging writes them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ml_platform_cli.main import main as mlp

pytest.importorskip("shtab")


def _complete(script: Path, words: list[str]) -> list[str]:
    """COMPREPLY of the script's function for the command line ``words`` (the last one being
    the word under the cursor), as bash computes it on TAB."""
    line = " ".join(words)
    program = (
        f"source {script}\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        f"COMP_LINE={line!r}\nCOMP_POINT=${{#COMP_LINE}}\n"
        f"_shtab_mlp mlp {words[-1]!r} {words[-2]!r}\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return sorted(filter(None, done.stdout.split("\n")))


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    script = tmp_path_factory.mktemp("completion") / "mlp.bash"
    done = subprocess.run(
        [*_mlp_command(), "completion", "bash"], capture_output=True, text=True, check=True
    )
    script.write_text(done.stdout)
    return script


def _mlp_command() -> list[str]:
    import sys

    return [sys.executable, "-m", "ml_platform_cli"]


def test_bash_completes_commands_options_and_choices(bash_script: Path) -> None:
    assert _complete(bash_script, ["mlp", "mo"]) == ["models"]
    assert "package" in _complete(bash_script, ["mlp", "models", ""])
    assert "demo" in _complete(bash_script, ["mlp", "models", ""])
    assert _complete(bash_script, ["mlp", "models", "package", "--ens"]) == ["--ensemble"]
    assert _complete(bash_script, ["mlp", "models", "package", "--ensemble", ""]) == [
        "all",
        "image",
        "text",
    ]


def test_every_shell_gets_a_script(capsys: pytest.CaptureFixture[str]) -> None:
    for shell in ("zsh", "tcsh"):
        assert mlp(["completion", shell]) == 0
        assert "mlp" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        mlp(["completion", "fish"])


def test_package_help_names_archives_as_packaging_writes_them(tmp_path: Path) -> None:
    """The group titles of `mlp models package --help` against the names a real packaging
    run writes (the demo models, both ensembles)."""
    done = subprocess.run(
        [*_mlp_command(), "models", "package", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "300"},
    )
    shown = re.findall(r"\b(model_[\w<>]+?)-v<version>\.tar\.gz", done.stdout)
    assert shown == ["model_tf_dali", "model_trt_python_<gpu>", "model_onnx_python"]
    assert mlp(["models", "demo", "--out", str(tmp_path / "demo")]) == 0
    demo = tmp_path / "demo"
    argv = ["--inception-onnx", str(demo / "classifier.onnx")]
    argv += [
        "--inception-labels",
        str(demo / "labels.txt"),
        "--encoder",
        str(demo / "encoder.onnx"),
    ]
    assert mlp(["models", "package", "--out", str(tmp_path / "out"), *argv]) == 0
    written = sorted(p.name for p in (tmp_path / "out").glob("*.tar.gz"))
    patterns = [re.escape(name) + r"-v[0-9a-f]{8}\.tar\.gz" for name in shown if "<" not in name]
    assert sorted(next(n for n in written if re.fullmatch(p, n)) for p in patterns) == written
