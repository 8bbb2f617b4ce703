"""The timeout the image build gives the BERT sample's instance-metadata calls, run for real:
calls written as the pinned script writes them (the fragments script_patch.CALLS match),
against a local server that accepts connections and never answers, as a pod sees IMDS (the
node's hop limit 1 drops the answer). Observed: unpatched, the call is still waiting after
the timeout and a second more; patched, it falls back after the timeout. Taken from the pinned script: where the two
calls are (script_patch.py's docstring; the build checks the patched file's sha256)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ml_platform.training import script_patch
from tests.unit.training.test_training_image import DOCKERFILE, _run_instructions


@pytest.fixture
def black_hole() -> Iterator[int]:
    """A TCP port that accepts connections and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def _metadata_script(port: int) -> str:
    base = f"http://127.0.0.1:{port}/latest"
    return (
        "import requests\n"
        "try:\n"
        f'    token = requests.put("{base}/api/token", headers={{{script_patch.CALLS[0]}\n'
        f'    data = requests.get("{base}/meta-data/instance-type", '
        f"headers={{{script_patch.CALLS[1]}\n"
        "    print(data.text)\n"
        "except Exception:\n"
        '    print("fallback")\n'
    )


def test_patched_calls_fall_back_instead_of_waiting(black_hole: int, tmp_path: Path) -> None:
    original = _metadata_script(black_hole)
    unpatched = tmp_path / "unpatched.py"
    unpatched.write_text(original)
    patched = tmp_path / "patched.py"
    patched.write_text(script_patch.patch(original))
    # Both at once (the test waits on the timeout once, not twice): the patched script falls
    # back; the unpatched one, started first, is still waiting a second after that.
    waiting = subprocess.Popen(
        [sys.executable, str(unpatched)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        start = time.monotonic()
        run = subprocess.run(
            [sys.executable, str(patched)], capture_output=True, text=True, timeout=30
        )
        took = time.monotonic() - start
        assert run.stdout.strip() == "fallback", run.stderr
        assert took < script_patch.TIMEOUT_S + 5
        with pytest.raises(subprocess.TimeoutExpired):
            waiting.wait(timeout=max(script_patch.TIMEOUT_S + 1 - took, 1))
    finally:
        waiting.kill()
        waiting.wait()


def test_a_call_not_found_once_fails_the_patch(tmp_path: Path) -> None:
    text = _metadata_script(1)
    with pytest.raises(ValueError, match="found 0 times, expected once"):
        script_patch.patch(text.replace(script_patch.CALLS[1], "x"))
    with pytest.raises(ValueError, match="found 2 times, expected once"):
        script_patch.patch(text + text)
    # The build's entry point: a file that is not the pinned script is refused by its sha256
    # and left unchanged.
    path = tmp_path / "script.py"
    path.write_text(text)
    assert script_patch.main([str(path)]) == 1
    assert path.read_text() == text


def test_the_build_patches_the_script_after_fetching_it_and_before_installing() -> None:
    assert re.search(r"^COPY script_patch\.py /tmp/script_patch\.py$", DOCKERFILE, re.MULTILINE)
    runs = _run_instructions()
    fetch = next(i for i, r in enumerate(runs) if "sha256sum -c" in r)
    patch = next(i for i, r in enumerate(runs) if "script_patch.py" in r)
    install = next(i for i, r in enumerate(runs) if "pip install" in r)
    assert fetch < patch < install
    assert "python3 /tmp/script_patch.py dp_bert_large_hf_pretrain_hdf5.py" in runs[patch]
