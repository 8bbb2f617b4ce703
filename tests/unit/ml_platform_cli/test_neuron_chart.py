"""Neuron's chart: `mlp charts fetch` against an OCI registry on loopback that answers as ECR
Public does (an anonymous token, the manifest of a tag, the chart layer as a blob), verified
manifest -> layer -> archive and unpacked safely; the stack then deploys it as a chart asset
(cdk-nag clean) and warns when it has to fall back to the repository."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ml_platform.stacks.training_cluster import NEURON_CHART_BY_VERSION_WARNING
from ml_platform.versions import NEURON_HELM_OCI_REPOSITORY
from ml_platform_cli.main import main
from tests.support import SynthesizedPlatform, cdk_json_context, synthesize

CHART_YAML = "apiVersion: v2\nname: neuron-helm-chart\nversion: 1.10.0\nappVersion: 1.10.0\n"
TOKEN = "anonymous-pull-token"
VOLCANO_CHART_YAML = "apiVersion: v2\nname: volcano\nversion: 1.15.1\n"


def _tgz(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


CHART = _tgz(
    {
        "neuron-helm-chart/Chart.yaml": CHART_YAML.encode(),
        "neuron-helm-chart/templates/device-plugin/device-plugin-daemonset.yaml": b"# a template\n",
    }
)


def _manifest(layer_digest: str, size: int) -> bytes:
    """An OCI image manifest as Helm pushes a chart: its config and one chart layer."""
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.cncf.helm.config.v1+json",
                "digest": _sha(b"{}"),
                "size": 2,
            },
            "layers": [
                {
                    "mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
                    "digest": layer_digest,
                    "size": size,
                }
            ],
        }
    ).encode()


@dataclass
class Registry:
    """What the stand-in serves: the manifest of tag 1.10.0 and blobs by digest."""

    url: str
    manifest: bytes = b""
    blobs: dict[str, bytes] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)

    def publish(self, archive: bytes, *, layer_digest: str | None = None) -> str:
        """Serve ``archive`` as the chart layer (stated in the manifest as ``layer_digest``,
        default its own digest); return the manifest's digest."""
        digest = layer_digest or _sha(archive)
        self.blobs = {digest: archive}
        self.manifest = _manifest(digest, len(archive))
        return _sha(self.manifest)


def _handler(registry: Registry) -> type[BaseHTTPRequestHandler]:
    prefix = f"/v2/{NEURON_HELM_OCI_REPOSITORY}/"

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            registry.requests.append((self.path, self.headers.get("Authorization")))
            if self.path == f"/token/?scope=repository:{NEURON_HELM_OCI_REPOSITORY}:pull":
                return self._send(200, json.dumps({"token": TOKEN}).encode(), "application/json")
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._send(401, b"{}", "application/json")
            if self.path == f"{prefix}manifests/1.10.0":
                accept = self.headers.get("Accept", "")
                assert "application/vnd.oci.image.manifest.v1+json" in accept
                return self._send(
                    200, registry.manifest, "application/vnd.oci.image.manifest.v1+json"
                )
            if self.path.startswith(f"{prefix}blobs/"):
                blob = registry.blobs.get(self.path.removeprefix(f"{prefix}blobs/"))
                if blob is not None:
                    return self._send(200, blob, "application/octet-stream")
            return self._send(404, b"{}", "application/json")

    return Handler


@pytest.fixture(scope="module")
def registry() -> Iterator[Registry]:
    holder = Registry(url="")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(holder))
    holder.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield holder
    finally:
        server.shutdown()
        server.server_close()


def _fetch(
    project: Path,
    registry: Registry,
    capsys: pytest.CaptureFixture[str],
    manifest_digest: str,
    archive_sha256: str | None = None,
) -> tuple[int, str]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("ml_platform.versions.NEURON_HELM_CHART_MANIFEST_DIGEST", manifest_digest)
        patch.setattr("ml_platform.versions.NEURON_HELM_CHART_SHA256", archive_sha256)
        code = main(
            [
                *("--cdk-json", str(project / "cdk.json"), "charts", "fetch"),
                *("--only", "neuron", "--registry", registry.url),
            ]
        )
    captured = capsys.readouterr()
    return code, captured.out + captured.err


DEST = Path(".charts", "neuron-helm-chart-1.10.0")
RECORD = Path(".charts", "neuron-helm-chart-1.10.0.sha256")


def test_fetch_verifies_the_chain_and_unpacks_the_chart(registry, tmp_path, capsys) -> None:
    manifest = registry.publish(CHART)
    registry.requests.clear()
    code, out = _fetch(tmp_path, registry, capsys, manifest)
    assert code == 0, out
    assert (tmp_path / DEST / "Chart.yaml").read_text() == CHART_YAML
    assert (tmp_path / DEST / "templates/device-plugin/device-plugin-daemonset.yaml").is_file()
    archive = hashlib.sha256(CHART).hexdigest()
    assert f"manifest {manifest} verified, archive sha256 {archive}" in out
    # No public source states the archive's digest: the verified one is recorded.
    assert (tmp_path / RECORD).read_text() == f"{archive}\n"
    assert "pin it as NEURON_HELM_CHART_SHA256" in out
    # The token endpoint first, anonymously; then manifest and blob with its token.
    kinds = ("token", "manifests", "blobs")
    paths = [(next(k for k in kinds if f"/{k}/" in p), auth) for p, auth in registry.requests]
    assert paths == [
        ("token", None),
        ("manifests", f"Bearer {TOKEN}"),
        ("blobs", f"Bearer {TOKEN}"),
    ]


def test_fetch_refuses_a_manifest_other_than_the_pin(registry, tmp_path, capsys) -> None:
    served = registry.publish(CHART)
    pinned = "sha256:" + "1" * 64
    code, out = _fetch(tmp_path, registry, capsys, pinned)
    assert code == 1
    assert f"manifest digest {served}, not the pinned {pinned}" in out
    assert not (tmp_path / ".charts").exists()


def test_fetch_refuses_a_blob_other_than_the_manifest_states(registry, tmp_path, capsys) -> None:
    """The manifest (the pinned one) names the chart's digest, but other bytes come back."""
    other = _tgz({"neuron-helm-chart/Chart.yaml": CHART_YAML.encode(), "neuron-helm-chart/x": b"!"})
    manifest = registry.publish(other, layer_digest=_sha(CHART))
    registry.blobs = {_sha(CHART): other}
    code, out = _fetch(tmp_path, registry, capsys, manifest)
    assert code == 1
    assert f"SHA-256 {_sha(other)}, not the manifest's {_sha(CHART)}" in out
    assert not (tmp_path / DEST).exists() and not (tmp_path / RECORD).exists()


def test_fetch_requires_the_pinned_archive_digest(registry, tmp_path, capsys) -> None:
    manifest = registry.publish(CHART)
    pinned = "2" * 64
    code, out = _fetch(tmp_path, registry, capsys, manifest, archive_sha256=pinned)
    assert code == 1
    assert f"chart archive {_sha(CHART)}, not the pinned sha256:{pinned}" in out
    assert not (tmp_path / ".charts").exists()
    # The right pin passes.
    code, out = _fetch(
        tmp_path, registry, capsys, manifest, archive_sha256=hashlib.sha256(CHART).hexdigest()
    )
    assert code == 0, out
    assert "(pinned)" in out


def test_a_later_fetch_requires_the_recorded_archive(registry, tmp_path, capsys) -> None:
    """Without a pin, the first fetch's record is the pin: a re-pushed chart is refused."""
    (tmp_path / RECORD).parent.mkdir(parents=True)
    (tmp_path / RECORD).write_text("3" * 64 + "\n")
    manifest = registry.publish(CHART)
    code, out = _fetch(tmp_path, registry, capsys, manifest)
    assert code == 1
    assert f"not the recorded ({tmp_path / RECORD}) sha256:{'3' * 64}" in out
    assert not (tmp_path / DEST).exists()


def test_fetch_refuses_an_unsafe_archive(registry, tmp_path, capsys) -> None:
    unsafe = _tgz({"neuron-helm-chart/Chart.yaml": CHART_YAML.encode(), "../escape": b"x"})
    manifest = registry.publish(unsafe)
    code, out = _fetch(tmp_path, registry, capsys, manifest)
    assert code == 1
    assert "name climbs out with '..'" in out
    assert not (tmp_path / "escape").exists() and not (tmp_path / DEST).exists()


def test_fetch_refuses_a_chart_of_another_version(registry, tmp_path, capsys) -> None:
    other = _tgz({"neuron-helm-chart/Chart.yaml": CHART_YAML.replace("1.10.0", "1.9.0").encode()})
    manifest = registry.publish(other)
    code, out = _fetch(tmp_path, registry, capsys, manifest)
    assert code == 1
    assert (
        "Chart.yaml names ('neuron-helm-chart', '1.9.0'), not ('neuron-helm-chart', '1.10.0')"
        in out
    )
    assert not (tmp_path / DEST).exists()


def test_only_volcano_leaves_neurons_chart_alone(registry, tmp_path, capsys) -> None:
    """`--only volcano` asks Volcano's repository only (here: nothing listens, so it fails
    there), never the OCI registry."""
    registry.requests.clear()
    code = main(
        [
            *("--cdk-json", str(tmp_path / "cdk.json"), "charts", "fetch", "--only", "volcano"),
            *("--repository", "http://127.0.0.1:9", "--registry", registry.url),
        ]
    )
    assert code == 1
    assert registry.requests == []
    assert "127.0.0.1:9/index.yaml" in capsys.readouterr().err


def test_fetch_without_only_fetches_both_charts(registry, tmp_path, capsys) -> None:
    """The default: Volcano's chart from its Helm repository and Neuron's from the registry."""
    from functools import partial
    from http.server import SimpleHTTPRequestHandler

    volcano = _tgz({"volcano/Chart.yaml": b"apiVersion: v2\nname: volcano\nversion: 1.15.1\n"})
    root = tmp_path / "helm-repo"
    root.mkdir()
    (root / "volcano-1.15.1.tgz").write_bytes(volcano)
    (root / "index.yaml").write_text(
        "apiVersion: v1\nentries:\n  volcano:\n  - name: volcano\n    version: 1.15.1\n"
        f"    digest: {hashlib.sha256(volcano).hexdigest()}\n    urls:\n    - volcano-1.15.1.tgz\n"
    )
    handler = partial(SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    manifest = registry.publish(CHART)
    project = tmp_path / "project"
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("ml_platform.versions.NEURON_HELM_CHART_MANIFEST_DIGEST", manifest)
            patch.setattr("ml_platform.versions.NEURON_HELM_CHART_SHA256", None)
            patch.setattr(
                "ml_platform.versions.VOLCANO_HELM_CHART_SHA256",
                hashlib.sha256(volcano).hexdigest(),
            )
            code = main(
                [
                    *("--cdk-json", str(project / "cdk.json"), "charts", "fetch"),
                    *("--repository", f"http://127.0.0.1:{server.server_address[1]}"),
                    *("--registry", registry.url),
                ]
            )
    finally:
        server.shutdown()
        server.server_close()
    out = capsys.readouterr()
    assert code == 0, out.err
    assert (project / ".charts/volcano-1.15.1/Chart.yaml").is_file()
    assert (project / DEST / "Chart.yaml").read_text() == CHART_YAML


@pytest.fixture(scope="module")
def with_chart(registry: Registry, tmp_path_factory: pytest.TempPathFactory) -> SynthesizedPlatform:
    """The app (inference off, to stay quick) with the fetched Neuron chart and a Volcano
    chart folder (both charts shipped as assets, as after a full `mlp charts fetch`), cdk-nag
    on."""
    from ml_platform_cli.charts import fetch_oci_chart

    manifest = registry.publish(CHART)
    chart, _ = fetch_oci_chart(
        registry.url,
        NEURON_HELM_OCI_REPOSITORY,
        "1.10.0",
        manifest,
        None,
        "neuron-helm-chart",
        tmp_path_factory.mktemp("project") / DEST,
    )
    volcano = tmp_path_factory.mktemp("volcano") / "volcano-1.15.1"
    volcano.mkdir()
    (volcano / "Chart.yaml").write_text(VOLCANO_CHART_YAML)
    return synthesize(
        tmp_path_factory.mktemp("cdk.out.neuron"),
        {"features": {"inference": False}},
        volcano_chart_dir=str(volcano),
        neuron_chart_dir=str(chart),
    )


def _metadata_warnings(synth: SynthesizedPlatform) -> list[str]:
    return [w for ws in synth.warnings("TrainingCluster").values() for w in ws]


def test_the_stack_deploys_the_verified_chart_as_an_asset(with_chart: SynthesizedPlatform) -> None:
    assert with_chart.validation_error is None
    resources = with_chart.template_json("TrainingCluster")["Resources"]
    (props,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart" and r["Properties"]["Release"] == "neuron"
    ]
    assert "ChartAssetURL" in props
    assert not {"Repository", "Chart", "Version"} & set(props)
    assert props["Namespace"] == "kube-system"
    assert json.loads(props["Values"])["devicePlugin"]["fullnameOverride"] == (
        "ml-platform-neuron-device-plugin"
    )
    folders = with_chart.asset_folders("TrainingCluster")
    charts = [f / "Chart.yaml" for f in folders if (f / "Chart.yaml").is_file()]
    assert sorted(c.read_text() for c in charts) == sorted([CHART_YAML, VOLCANO_CHART_YAML])
    assert not any(NEURON_CHART_BY_VERSION_WARNING in w for w in _metadata_warnings(with_chart))


def test_without_the_chart_synthesis_warns_and_fetches_by_version(
    synth: SynthesizedPlatform,
) -> None:
    (warning,) = [w for w in _metadata_warnings(synth) if NEURON_CHART_BY_VERSION_WARNING in w]
    assert "by version at deploy time" in warning and "mlp charts fetch" in warning
    assert "oci://public.ecr.aws/neuron/neuron-helm-chart" in warning


def test_a_chart_dir_without_chart_yaml_is_refused(tmp_path: Path) -> None:
    from ml_platform.app import build_platform, new_app, settings_from_app

    app = new_app(outdir=str(tmp_path / "out"), context=cdk_json_context())
    with pytest.raises(
        ValueError, match=r"neuron_chart_dir=.*no Chart\.yaml there; run `mlp charts fetch`"
    ):
        build_platform(app, settings_from_app(app), nag=False, neuron_chart_dir=str(tmp_path))
