"""Fixtures of the CLI tests: an isolated AWS environment, a project folder, the CLI runner,
archives built once, and (for the end-to-end test) a moto server on a free localhost port."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from ml_platform_cli.main import main
from tests import local_moto
from tests.helpers.cli import REPO, build_archives, isolate_aws


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
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder holding a copy of this repository's cdk.json; returns that file.
    HOME is an empty folder, so no ~/.cdk.json of the developer's joins the context."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
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


@dataclass(frozen=True)
class MotoServer:
    url: str  # http://localhost:PORT (S3 virtual-host names resolve under localhost)
    port: int


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory):
    """The local moto server (:mod:`tests.local_moto`), killed at session end."""
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with local_moto.moto_server(log, url_host="localhost") as (url, port):
        yield MotoServer(url=url, port=port)
