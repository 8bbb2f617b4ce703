"""ml_platform.triton.demo_models: what `mlp models demo` writes, run by real readers
(onnxruntime for both models, Pillow for the PNG); the whole path through Triton is the
README's test (tests/e2e/triton/test_try_locally.py)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import onnxruntime as ort
from PIL import Image

from ml_platform.triton import demo_models as demo
from ml_platform_cli.main import main as mlp


def test_the_encoder_looks_tokens_up_in_its_table_and_pools_over_the_mask() -> None:
    session = ort.InferenceSession(demo.demo_encoder())
    ids = np.zeros((2, demo.SEQ_LEN), dtype=np.int32)
    mask = np.zeros_like(ids)
    ids[0, :3], mask[0, :3] = [101, 2000, 102], 1
    ids[1, :2], mask[1, :2] = [101, 5000], 1
    output, pooled = session.run(None, {"token_ids": ids, "attn_mask": mask})
    table = np.random.default_rng(1).normal(0, 1, (demo.TABLE_ROWS, demo.HIDDEN))
    assert output.shape == (2, demo.SEQ_LEN, demo.HIDDEN)
    np.testing.assert_allclose(output[0, 1], table[2000 % demo.TABLE_ROWS], rtol=1e-6)
    np.testing.assert_allclose(pooled[1], table[[101, 5000 % demo.TABLE_ROWS]].mean(0), rtol=1e-5)


def test_the_classifier_gives_a_distribution_over_every_label() -> None:
    session = ort.InferenceSession(demo.demo_classifier())
    image = np.random.default_rng(0).uniform(-1, 1, (1, 299, 299, 3)).astype(np.float32)
    (scores,) = session.run(None, {"input": image})
    assert scores.shape == (1, demo.CLASSES) == (1, len(demo.demo_labels().splitlines()))
    assert abs(float(scores.sum()) - 1) < 1e-5


def test_the_png_decodes_to_the_pattern() -> None:
    picture = demo.pattern_picture()
    decoded = np.asarray(Image.open(io.BytesIO(demo.png(picture))))
    assert decoded.shape == (480, 640, 3)
    np.testing.assert_array_equal(decoded, picture)


def test_mlp_models_demo_writes_every_file(tmp_path: Path, capsys) -> None:
    assert mlp(["models", "demo", "--out", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "demo").iterdir()) == sorted(demo.FILES)
    assert "demo weights, not for production" in out
