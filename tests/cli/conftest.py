"""Fixtures of the CLI tests: an isolated AWS environment, a project folder, the CLI runner,
archives built once, and (for the end-to-end test) a moto server on a free localhost port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from ml_platform.cli.main import main
from tests.cli.support import REPO, build_archives, isolate_aws


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Fake credentials and nothing else from the developer's AWS setup."""
    isolate_aws(monkeypatch, tmp_path, credentials=True)


@pytest.fixture
def aws(aws_env):
    """moto's in-process AWS (no network)."""
    from moto import mock_aws

    with mock_aws():
        yield


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder holding a copy of this repository's cdk.json; returns that file."""
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copy(REPO / "cdk.json", folder / "cdk.json")
    return folder / "cdk.json"


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def mlp(capsys: pytest.CaptureFixture[str]):
    """Run ``mlp`` in-process: ``mlp("status", "--json")`` -> Result(code, out, err)."""

    def run(*argv: str) -> Result:
        capsys.readouterr()
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture(scope="session")
def archives(tmp_path_factory: pytest.TempPathFactory):
    """Both real ensemble archives, built once from small fake model files."""
    return build_archives(tmp_path_factory.mktemp("archives"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class MotoServer:
    url: str  # http://localhost:PORT (S3 virtual-host names resolve under localhost)
    port: int


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory):
    """``moto_server`` as a subprocess on a free localhost port, killed at session end
    (run from the repository root, so ``tests.cli.moto_server_patched`` imports)."""
    port = _free_port()
    log = (tmp_path_factory.mktemp("moto") / "server.log").open("wb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    process = subprocess.Popen(
        # moto.server, with one moto bug fixed (see the module).
        [sys.executable, "-m", "tests.cli.moto_server_patched", "-p", str(port)],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=Path(__file__).resolve().parents[2],
    )
    url = f"http://localhost:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start (see {log.name})") from None
                time.sleep(0.1)
        yield MotoServer(url=url, port=port)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
