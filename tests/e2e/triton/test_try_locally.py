"""The README's "Try it locally", run as written: demo models, both archives packaged, the
real local Triton server (release 24.10, SageMaker front end, CPU) started with the serve
block and called with the invoke block.

Observed: every command's exit status and output, the server's "ready" line, and the text
embeddings against a NumPy reference computed from the demo encoder's own table with the
project's WordPiece tokenizer (the ensemble's preprocess -> encoder -> mean pooling -> L2
norm). The image answer is checked for its shape (ranked demo labels): its reference would
need DALI's decoder, which the real-server test (test_local_server.py) compares already.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ml_platform_cli.local_server import LocalServerError, can_make_namespace, find_server_env
from tests.helpers.doc_blocks import doc_block
from tests.support import ROOT

SERVER_ENV = ROOT / ".venv-triton"


def _clone_like(folder: Path) -> Path:
    """A folder laid out as the README expects a clone: .venv, .venv-triton, cdk.json."""
    folder.mkdir()
    (folder / ".venv").symlink_to(Path(sys.prefix))
    (folder / ".venv-triton").symlink_to(SERVER_ENV.resolve())
    (folder / "cdk.json").write_text((ROOT / "cdk.json").read_text())
    return folder


def _bash(text: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", text],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _reference_embeddings(texts: list[str]) -> np.ndarray:
    from ml_platform.triton.demo_models import HIDDEN, SEQ_LEN, TABLE_ROWS
    from ml_platform.triton.wordpiece import WordPieceTokenizer
    from ml_platform_cli.package import default_tokenizer_dir

    tokenizer_dir = default_tokenizer_dir()
    assert tokenizer_dir is not None
    ids, mask = WordPieceTokenizer.from_dir(tokenizer_dir).encode(texts, SEQ_LEN)
    table = np.random.default_rng(1).normal(0, 1, (TABLE_ROWS, HIDDEN)).astype(np.float32)
    vectors = table[ids.astype(np.int64) % TABLE_ROWS] * mask[..., None]
    pooled = vectors.sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
    normed: np.ndarray = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return normed


def skip_without_local_server() -> None:
    """Skip where the local server cannot run: no private network namespace, or no server
    environment (`make triton-env`)."""
    problem = can_make_namespace()
    if problem:
        pytest.skip(f"the local Triton server runs only in a private network namespace: {problem}")
    try:
        find_server_env(SERVER_ENV)
    except LocalServerError as error:
        pytest.skip(f"no local Triton server environment ({error}); `make triton-env` makes it")


def test_readme_try_it_locally_as_written(tmp_path: Path) -> None:
    skip_without_local_server()
    clone = _clone_like(tmp_path / "clone")

    built = _bash(doc_block("try-locally-build").text, clone)
    assert "demo weights, not for production" in built.stdout
    archives = sorted(p.name for p in (clone / "dist" / "models").glob("*.tar.gz"))
    assert [re.sub(r"-v[0-9a-f]{8}", "", n) for n in archives] == [
        "model_onnx_python.tar.gz",
        "model_tf_dali.tar.gz",
    ]

    serve = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", doc_block("try-locally-serve").text],
        cwd=clone,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,  # Ctrl-C reaches the whole group, as in a terminal
    )
    try:
        said = []
        while not (said and said[-1].startswith("ready:")):
            line = serve.stdout.readline() if serve.stdout else ""
            assert line, "".join(said)
            said.append(line)
        assert said[-1].startswith("ready: 2 of 2 archives loaded"), "".join(said)

        invoked = _bash(doc_block("try-locally-invoke").text, clone).stdout.splitlines()
    finally:
        os.killpg(serve.pid, signal.SIGINT)
        assert serve.wait(timeout=60) == 0
    text_head, first, second, image_head, *ranked = invoked
    assert re.fullmatch(
        r"local server \(dist/models\) / model_onnx_python-v\w+\.tar\.gz: .*", text_head
    )
    texts = ["A cat sits on the mat.", "A dog sleeps."]
    reference = _reference_embeddings(texts)
    for line, text, expected in zip((first, second), texts, reference, strict=True):
        match = re.fullmatch(
            rf"'{re.escape(text)}': dimension 384, norm 1\.0000, first \[(.*), \.\.\.\]", line
        )
        assert match, line
        shown = [float(v) for v in match[1].split(", ")]
        np.testing.assert_allclose(shown, expected[:5], atol=1e-4)
    assert re.fullmatch(
        r"local server \(dist/models\) / model_tf_dali-v\w+\.tar\.gz: .*", image_head
    )
    assert len(ranked) == 3
    scores = []
    for rank, line in enumerate(ranked, start=1):
        match = re.fullmatch(rf" {rank}\. (0\.\d{{4}})  demo class (\d+)  \(class \2\)", line)
        assert match, line
        scores.append(float(match[1]))
    assert scores == sorted(scores, reverse=True)
