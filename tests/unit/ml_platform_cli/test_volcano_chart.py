"""Volcano's chart: `mlp charts fetch` against a Helm repository on loopback (index.yaml and
the archive), verified by SHA-256 both ways and unpacked safely; the stack then deploys it as
a chart asset (cdk-nag clean) and warns when it has to fall back to the repository."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ml_platform.stacks.training_cluster import VOLCANO_CHART_BY_VERSION_WARNING
from ml_platform_cli.main import main
from tests.support import SynthesizedPlatform, cdk_json_context, synthesize

CHART_YAML = "apiVersion: v2\nname: volcano\nversion: 1.15.1\nappVersion: v1.15.1\n"


def _tgz(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


CHART = _tgz(
    {
        "volcano/Chart.yaml": CHART_YAML.encode(),
        "volcano/templates/scheduler.yaml": b"# a template\n",
    }
)
SHA = hashlib.sha256(CHART).hexdigest()


@dataclass
class Repo:
    url: str
    root: Path

    def publish(self, archive: bytes, digest: str) -> None:
        (self.root / "volcano-1.15.1.tgz").write_bytes(archive)
        (self.root / "index.yaml").write_text(
            "apiVersion: v1\nentries:\n  volcano:\n"
            f"  - name: volcano\n    version: 1.15.1\n    digest: {digest}\n"
            "    urls:\n    - volcano-1.15.1.tgz\n"
            f"  - name: volcano\n    version: 1.15.0\n    digest: {'0' * 64}\n"
            "    urls:\n    - volcano-1.15.0.tgz\n"
        )


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Repo]:
    root = tmp_path_factory.mktemp("helm-repo")
    handler = partial(SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield Repo(f"http://127.0.0.1:{server.server_address[1]}", root)
    finally:
        server.shutdown()
        server.server_close()


def _fetch(project: Path, repo: Repo, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("ml_platform.versions.VOLCANO_HELM_CHART_SHA256", SHA)
        code = main(
            [
                *("--cdk-json", str(project / "cdk.json"), "charts", "fetch"),
                *("--only", "volcano", "--repository", repo.url),
            ]
        )
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_fetch_verifies_and_unpacks_the_chart(repo: Repo, tmp_path: Path, capsys) -> None:
    repo.publish(CHART, SHA)
    code, out = _fetch(tmp_path, repo, capsys)
    assert code == 0, out
    chart = tmp_path / ".charts" / "volcano-1.15.1"
    assert (chart / "Chart.yaml").read_text() == CHART_YAML
    assert (chart / "templates" / "scheduler.yaml").is_file()
    assert f"sha256 {SHA} verified" in out


def test_fetch_refuses_an_index_digest_other_than_the_pin(repo, tmp_path, capsys) -> None:
    repo.publish(CHART, "1" * 64)
    code, out = _fetch(tmp_path, repo, capsys)
    assert code == 1
    assert f"has digest {'1' * 64}, not the pinned {SHA}" in out
    assert not (tmp_path / ".charts").exists()


def test_fetch_refuses_an_archive_other_than_the_pin(repo, tmp_path, capsys) -> None:
    """The index states the pinned digest but serves other bytes."""
    other = _tgz({"volcano/Chart.yaml": CHART_YAML.encode(), "volcano/templates/x.yaml": b"evil"})
    repo.publish(other, SHA)
    code, out = _fetch(tmp_path, repo, capsys)
    assert code == 1
    assert f"SHA-256 {hashlib.sha256(other).hexdigest()}, not the pinned {SHA}" in out
    assert not (tmp_path / ".charts").exists()


def test_fetch_refuses_an_unsafe_archive(repo, tmp_path, capsys) -> None:
    unsafe = _tgz({"volcano/Chart.yaml": CHART_YAML.encode(), "volcano/../../escape": b"x"})
    sha = hashlib.sha256(unsafe).hexdigest()
    repo.publish(unsafe, sha)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("ml_platform.versions.VOLCANO_HELM_CHART_SHA256", sha)
        code = main(
            [
                *("--cdk-json", str(tmp_path / "cdk.json"), "charts", "fetch"),
                *("--only", "volcano", "--repository", repo.url),
            ]
        )
    assert code == 1
    assert "name climbs out with '..'" in capsys.readouterr().err
    assert not (tmp_path / "escape").exists() and not (tmp_path / ".charts").exists()


@pytest.fixture(scope="module")
def with_chart(repo: Repo, tmp_path_factory: pytest.TempPathFactory) -> SynthesizedPlatform:
    """The app (inference off, to stay quick) with the fetched chart, cdk-nag on."""
    from ml_platform_cli.charts import fetch_chart

    repo.publish(CHART, SHA)
    chart = fetch_chart(
        repo.url,
        "volcano",
        "1.15.1",
        SHA,
        tmp_path_factory.mktemp("project") / ".charts" / "volcano-1.15.1",
    )
    return synthesize(
        tmp_path_factory.mktemp("cdk.out.chart"),
        {"features": {"inference": False}},
        volcano_chart_dir=str(chart),
    )


def _metadata_warnings(synth: SynthesizedPlatform) -> list[str]:
    return [w for ws in synth.warnings("TrainingCluster").values() for w in ws]


def test_the_stack_deploys_the_verified_chart_as_an_asset(with_chart: SynthesizedPlatform) -> None:
    assert with_chart.validation_error is None
    resources = with_chart.template_json("TrainingCluster")["Resources"]
    (chart,) = [
        r
        for r in resources.values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart" and r["Properties"]["Release"] == "volcano"
    ]
    props = chart["Properties"]
    assert "ChartAssetURL" in props
    assert not {"Repository", "Chart", "Version"} & set(props)
    assert json.loads(props["Values"])["basic"]["image_pull_policy"] == "IfNotPresent"
    # The asset is the chart folder, Chart.yaml at its root (the handler installs from it).
    folders = with_chart.asset_folders("TrainingCluster")
    charts = [f / "Chart.yaml" for f in folders if (f / "Chart.yaml").is_file()]
    assert [c.read_text() for c in charts] == [CHART_YAML]
    assert not any(VOLCANO_CHART_BY_VERSION_WARNING in w for w in _metadata_warnings(with_chart))


def test_without_the_chart_synthesis_warns_and_fetches_by_version(
    synth: SynthesizedPlatform,
) -> None:
    (warning,) = [w for w in _metadata_warnings(synth) if VOLCANO_CHART_BY_VERSION_WARNING in w]
    assert "by version at deploy time" in warning and "mlp charts fetch" in warning


def test_a_chart_dir_without_chart_yaml_is_refused(tmp_path: Path) -> None:
    from ml_platform.app import build_platform, new_app, settings_from_app

    app = new_app(outdir=str(tmp_path / "out"), context=cdk_json_context())
    with pytest.raises(
        ValueError, match=r"volcano_chart_dir=.*no Chart\.yaml there; run `mlp charts fetch`"
    ):
        build_platform(app, settings_from_app(app), nag=False, volcano_chart_dir=str(tmp_path))
