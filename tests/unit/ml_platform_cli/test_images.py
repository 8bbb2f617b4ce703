"""``mlp images resolve`` against a registry stub on loopback (the OCI distribution API with
the bearer-token challenge) and ECR through botocore's Stubber; what synthesis does with the
recorded digests."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import boto3
import pytest
from botocore.stub import Stubber

from ml_platform.config import IMAGE_DIGESTS_KEY, Settings, settings_from_cdk_json
from ml_platform_cli.images import platform_images
from ml_platform_cli.registry import MANIFEST_TYPES

TOKEN = "stub-token"


def _digest(name: str) -> str:
    return "sha256:" + hashlib.sha256(name.encode()).hexdigest()


class Registry(BaseHTTPRequestHandler):
    """Manifests of ``known`` (repository:tag) behind an anonymous bearer token, as Docker Hub
    and NGC answer: 401 with a ``WWW-Authenticate`` challenge, a token from the realm, then the
    digest header on HEAD."""

    known: ClassVar[set[str]] = set()
    requests: ClassVar[list[tuple[str, str, dict[str, str]]]] = []

    def _record(self) -> None:
        self.requests.append((self.command, self.path, dict(self.headers)))

    def do_GET(self) -> None:  # the token realm
        self._record()
        if not self.path.startswith("/token?"):
            self.send_error(404)
            return
        body = json.dumps({"token": TOKEN}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self) -> None:
        self._record()
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.send_response(401)
            host, port = self.server.server_address[:2]
            scope = self.path.split("/v2/", 1)[1].split("/manifests/", 1)[0]
            self.send_header(
                "WWW-Authenticate",
                f'Bearer realm="http://{host}:{port}/token",service="stub",'
                f'scope="repository:{scope}:pull"',
            )
            self.end_headers()
            return
        repository, _, tag = self.path.removeprefix("/v2/").partition("/manifests/")
        if f"{repository}:{tag}" not in self.known:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Docker-Content-Digest", _digest(f"{repository}:{tag}"))
        self.send_header("Content-Type", MANIFEST_TYPES[0])
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def registry() -> Iterator[str]:
    Registry.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def ecr(monkeypatch: pytest.MonkeyPatch, aws_env) -> Iterator[Stubber]:
    """The ECR client `mlp` uses, stubbed: expects BatchGetImage of the EFA plugin's tag."""
    client = boto3.client("ecr", region_name="us-west-2")
    stubber = Stubber(client)
    from ml_platform_cli.aws import Context

    real = Context.client
    monkeypatch.setattr(
        Context,
        "client",
        lambda self, service, region=None, **kw: (
            client if service == "ecr" else real(self, service, region, **kw)
        ),
    )
    with stubber:
        yield stubber


def _efa_response(stubber: Stubber) -> str:
    digest = _digest("efa")
    stubber.add_response(
        "batch_get_image",
        {
            "images": [
                {
                    "registryId": "602401143452",
                    "repositoryName": "eks/aws-efa-k8s-device-plugin",
                    "imageId": {"imageTag": "v0.5.20", "imageDigest": digest},
                }
            ],
            "failures": [],
        },
        {
            "registryId": "602401143452",
            "repositoryName": "eks/aws-efa-k8s-device-plugin",
            "imageIds": [{"imageTag": "v0.5.20"}],
            "acceptedMediaTypes": list(MANIFEST_TYPES),
        },
    )
    return digest


def _public(settings: Settings) -> list[str]:
    return [i for i in platform_images(settings) if ".dkr.ecr." not in i]


def test_resolve_records_every_digest_and_synthesis_pins_by_them(registry, ecr, project, mlp):
    settings = settings_from_cdk_json(str(project))
    public = _public(settings)
    Registry.known = {i.split("/", 1)[1] for i in public}
    efa = _efa_response(ecr)
    endpoints = [
        a
        for r in ("docker.io", "public.ecr.aws", "nvcr.io")
        for a in ("--endpoint", f"{r}={registry}")
    ]

    result = mlp("--cdk-json", project, "images", "resolve", *endpoints)

    assert result.code == 0, result.out + result.err
    ecr.assert_no_pending_responses()
    written = json.loads(project.with_name("cdk.context.json").read_text())
    expected = {i: _digest(i.split("/", 1)[1]) for i in public}
    expected[
        "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.20"
    ] = efa
    assert written[IMAGE_DIGESTS_KEY] == expected
    # The stub's digests differ from the public record of Volcano's: the registry's answer
    # is the one written, and the output says so.
    assert "differs from the public record" in result.out
    # Each manifest was asked for with HEAD, the token obtained through the challenge, and
    # every manifest kind accepted (an index digest for multi-platform images).
    heads = [r for r in Registry.requests if r[0] == "HEAD" and "Authorization" in r[2]]
    assert len(heads) == len(public)
    assert all(set(MANIFEST_TYPES) <= set(h[2]["Accept"].split(", ")) for h in heads)
    assert any(
        r[0] == "GET" and "scope=repository%3Avolcanosh%2Fvc-scheduler%3Apull" in r[1]
        for r in Registry.requests
    )

    # What synthesis sees now: every image pinned, none by tag only.
    after = settings_from_cdk_json(str(project))
    policy = after.image_policy
    assert policy.tag_only(platform_images(after)) == []
    assert policy.resolve("docker.io/tensorflow/tensorflow:2.20.0") == (
        "docker.io/tensorflow/tensorflow:2.20.0@" + _digest("tensorflow/tensorflow:2.20.0")
    )


def test_a_missing_tag_is_reported_and_the_others_are_written(registry, ecr, project, mlp):
    settings = settings_from_cdk_json(str(project))
    public = _public(settings)
    Registry.known = {i.split("/", 1)[1] for i in public} - {"tensorflow/tensorflow:2.20.0"}
    _efa_response(ecr)
    endpoints = [
        a
        for r in ("docker.io", "public.ecr.aws", "nvcr.io")
        for a in ("--endpoint", f"{r}={registry}")
    ]

    result = mlp("--cdk-json", project, "images", "resolve", *endpoints)

    assert result.code == 1
    assert "not resolved: docker.io/tensorflow/tensorflow:2.20.0: no such tag at" in result.out
    written = json.loads(project.with_name("cdk.context.json").read_text())[IMAGE_DIGESTS_KEY]
    assert "docker.io/tensorflow/tensorflow:2.20.0" not in written
    assert len(written) == len(public)  # the other public ones and the EFA plugin


def test_ecr_failure_names_the_image(registry, ecr, project, mlp):
    Registry.known = {i.split("/", 1)[1] for i in _public(settings_from_cdk_json(str(project)))}
    ecr.add_client_error("batch_get_image", "AccessDeniedException", "not authorized")
    endpoints = [
        a
        for r in ("docker.io", "public.ecr.aws", "nvcr.io")
        for a in ("--endpoint", f"{r}={registry}")
    ]
    result = mlp("--cdk-json", project, "images", "resolve", *endpoints)
    assert result.code == 1
    assert (
        "not resolved: 602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/"
        "aws-efa-k8s-device-plugin:v0.5.20: ecr:BatchGetImage failed"
    ) in result.out


def test_resolved_digests_survive_mlp_azs_and_cdk_json_digests_win(project) -> None:
    """The digests live under their own context key: `mlp azs` rewrites the ml-platform
    object of cdk.context.json, not this key; a digest set in cdk.json wins."""
    image = "docker.io/tensorflow/tensorflow:2.20.0"
    mine, recorded = "sha256:" + "1" * 64, "sha256:" + "2" * 64
    cdk = json.loads(project.read_text())
    cdk["context"]["ml-platform"]["images"] = {"digests": {image: mine}}
    project.write_text(json.dumps(cdk))
    other = "docker.io/volcanosh/vc-scheduler:v1.15.1"
    project.with_name("cdk.context.json").write_text(
        json.dumps({IMAGE_DIGESTS_KEY: {image: recorded, other: recorded}})
    )
    policy = settings_from_cdk_json(str(project)).image_policy
    assert policy.digest(image) == mine
    assert policy.digest(other) == recorded


def test_endpoint_option_is_checked(project, mlp):
    result = mlp("--cdk-json", project, "images", "resolve", "--endpoint", "docker.io")
    assert result.code == 1 and "--endpoint 'docker.io': expected REGISTRY=https://" in result.err


def test_list_shows_each_image_as_pulled_and_counts_the_tag_only_ones(project, mlp):
    result = mlp("--cdk-json", project, "images", "list")
    assert result.code == 0, result.err
    assert (
        "docker.io/volcanosh/vc-scheduler:v1.15.1\n    pulled as "
        "docker.io/volcanosh/vc-scheduler:v1.15.1@sha256:e79dc852"
    ) in result.out
    # Volcano's three and the Neuron plugin have a public digest.
    tag_only = len(platform_images(settings_from_cdk_json(str(project)))) - 4
    assert f"pinned by tag only ({tag_only}): run `mlp images resolve`" in result.out


def test_recorded_digests_are_validated_like_settings(project, mlp):
    project.with_name("cdk.context.json").write_text(
        json.dumps({IMAGE_DIGESTS_KEY: {"docker.io/tensorflow/tensorflow:2.20.0": "sha256:12"}})
    )
    result = mlp("--cdk-json", project, "images", "list")
    assert result.code == 1
    assert (
        "images.digests.docker.io/tensorflow/tensorflow:2.20.0 = 'sha256:12': expected "
        "'sha256:' and 64 lower-case hex digits"
    ) in result.err
