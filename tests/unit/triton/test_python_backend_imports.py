"""Every Python-backend model we ship runs in the stock Triton container: it imports
nothing beyond NumPy, the standard library and ``triton_python_backend_utils``."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from ml_platform.triton import image_ensemble, text_ensemble
from tests.helpers.triton_support import MINILM_DIR, TENSORRT, write_artifacts

ALLOWED = {"numpy", "triton_python_backend_utils"} | set(sys.stdlib_module_names)
DYNAMIC = {"import_module", "__import__"}


def imported_modules(source: str) -> set[str]:
    """Top-level names of every module ``source`` imports, at any depth of the code,
    including ``importlib.import_module("x")`` / ``__import__("x")`` with a literal name."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add("." if node.level else node.module.split(".")[0])
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in DYNAMIC and node.args:
                arg = node.args[0]
                literal = isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                names.add(arg.value.split(".")[0] if literal else "<computed>")
    return names


def shipped_python_files(tmp_path: Path) -> dict[str, str]:
    """Every ``.py`` file of every Python-backend model of both ensembles."""
    artifacts = write_artifacts(tmp_path)
    specs = [
        image_ensemble(classifier_path=artifacts.classifier, labels_path=artifacts.labels),
        text_ensemble(
            tokenizer_dir=MINILM_DIR,
            encoder_path=artifacts.plan,
            gpu_target="t4",
            tensorrt_version=TENSORRT,
        ),
        text_ensemble(tokenizer_dir=MINILM_DIR, encoder_path=artifacts.onnx, encoder_format="onnx"),
    ]
    return {
        f"{model.name}/{file.dest}": (
            file.content.decode() if file.content is not None else file.source.read_text("utf-8")
        )
        for spec in specs
        for model in spec.models
        if model.backend == "python"
        for file in model.files
        if file.dest.endswith(".py")
    }


def test_shipped_python_models_need_nothing_beyond_numpy(tmp_path: Path) -> None:
    files = shipped_python_files(tmp_path)
    # model.py of preprocess and postprocess, and the helpers they load beside them.
    assert set(files) == {
        "preprocess/1/model.py",
        "preprocess/1/wordpiece.py",
        "postprocess/1/model.py",
        "postprocess/1/pooling.py",
    }
    problems = {name: sorted(imported_modules(source) - ALLOWED) for name, source in files.items()}
    assert {name: bad for name, bad in problems.items() if bad} == {}


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("def f():\n    from transformers import AutoTokenizer\n", {"transformers"}),
        ("import numpy as np, os.path\n", {"numpy", "os"}),
        ("import importlib\nimportlib.import_module('torch.nn')\n", {"importlib", "torch"}),
        ("__import__(name)\n", {"<computed>"}),
        ("from . import x\n", {"."}),
    ],
)
def test_import_scan_sees_every_kind_of_import(source: str, found: set[str]) -> None:
    assert imported_modules(source) == found
