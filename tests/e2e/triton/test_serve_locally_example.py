"""examples/serve-locally/: its README's block run as written in a folder laid out as a clone,
against the real local Triton server (release 24.10, SageMaker front end, CPU).

Observed: the program's exit status and output, the two versioned archives it writes, the
text embeddings against a NumPy reference of the demo encoder (the helper of
test_try_locally.py: the project's WordPiece tokenizer, the encoder's own table, mean pooling,
L2 norm), the image answer's shape (ranked demo labels; its reference needs DALI's decoder,
which test_local_server.py compares), and that the server's work folder is gone afterwards.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from tests.e2e.triton.test_try_locally import (
    _clone_like,
    _reference_embeddings,
    skip_without_local_server,
)
from tests.helpers.doc_blocks import doc_block
from tests.support import ROOT

SENTENCES = ["A cat sits on the mat.", "A dog sleeps."]  # the program's own two sentences


def test_serve_locally_example_as_written(tmp_path: Path) -> None:
    skip_without_local_server()
    clone = _clone_like(tmp_path / "clone")
    (clone / "examples").symlink_to(ROOT / "examples")
    # The server's work folder (tempfile) goes here: short, as a user's TMPDIR is (its Unix
    # socket path must fit 107 bytes; pytest's tmp_path can be deeper).
    scratch = Path(tempfile.mkdtemp(prefix="mlp-example-"))
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", doc_block("serve-locally-example").text],
            cwd=clone,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(scratch)},
        )
        left = list(scratch.iterdir())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "demo weights, not for production: their answers mean nothing"
    archives = sorted(p.name for p in (clone / "build/serve-locally/models").glob("*.tar.gz"))
    assert [re.sub(r"-v[0-9a-f]{8}", "", n) for n in archives] == [
        "model_onnx_python.tar.gz",
        "model_tf_dali.tar.gz",
    ]
    assert lines[1] == f"packaged: {archives[1]}, {archives[0]}"

    text_at = lines.index(f"{archives[0]}:", 2 + 9)  # after both load reports (4 + 5 lines)
    reference = _reference_embeddings(SENTENCES)
    for line, sentence, expected in zip(
        lines[text_at + 1 : text_at + 3], SENTENCES, reference, strict=True
    ):
        match = re.fullmatch(
            rf'  "{re.escape(sentence)}": 384 dimensions, norm 1\.0000, first \[(.*), \.\.\.\]',
            line,
        )
        assert match, line
        np.testing.assert_allclose(
            [float(v) for v in match[1].split(", ")], expected[:5], atol=1e-4
        )

    assert lines[text_at + 3] == f"{archives[1]}:"
    scores = []
    for rank, line in enumerate(lines[text_at + 4 : text_at + 7], start=1):
        match = re.fullmatch(rf"  {rank}\. (0\.\d{{4}})  demo class \d+", line)
        assert match, line
        scores.append(float(match[1]))
    assert scores == sorted(scores, reverse=True)
    assert lines[text_at + 7 :] == ["server stopped"]
    assert left == []  # socket, log and unpacked archives removed
