"""``mlp images mirror``: the Docker Hub images the platform pulls, copied by digest from a
registry stub on loopback (the OCI distribution API with its bearer-token challenge, serving
multi-platform indexes) into moto's ECR (in-process), then pulled through ``images.mirrors``.

Observed: what moto's ECR holds afterwards (repositories, manifests by tag and digest, layers
whose digests moto computes from the uploaded bytes) and what synthesis then pulls. Taken
from sources: the registry protocol (OCI distribution spec) the stub speaks."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import boto3
import pytest

from ml_platform.config import IMAGE_DIGESTS_KEY, IMAGE_MIRRORS_KEY, settings_from_cdk_json
from ml_platform_cli.images import platform_images

TOKEN = "mirror-token"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def _sha(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


class Hub(BaseHTTPRequestHandler):
    """Manifests and blobs by digest, per repository, behind an anonymous bearer token."""

    manifests: ClassVar[dict[str, tuple[bytes, str]]] = {}
    blobs: ClassVar[dict[str, bytes]] = {}
    gets: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        if self.path.split("?")[0] == "/token":
            self._send(200, json.dumps({"token": TOKEN}).encode(), "application/json")
            return
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            host, port = self.server.server_address[:2]
            self.send_response(401)
            self.send_header(
                "WWW-Authenticate", f'Bearer realm="http://{host}:{port}/token",service="hub"'
            )
            self.end_headers()
            return
        self.gets.append(self.path)
        _, _, rest = self.path.partition("/v2/")
        if "/manifests/" in rest:
            found = self.manifests.get(rest.rsplit("/manifests/", 1)[1])
            if found:
                self._send(200, *found)
                return
        elif "/blobs/" in rest:
            blob = self.blobs.get(rest.rsplit("/blobs/", 1)[1])
            if blob is not None:
                self._send(200, blob, "application/octet-stream")
                return
        self._send(404, b"", "text/plain")

    def _send(self, code: int, body: bytes, media_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", media_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _descriptor(media_type: str, body: bytes) -> dict[str, object]:
    return {"mediaType": media_type, "digest": _sha(body), "size": len(body)}


def _publish(image: str) -> str:
    """An index of two platform images for ``image`` on the stub; returns its digest."""
    entries = []
    for arch in ("amd64", "arm64"):
        config = json.dumps({"architecture": arch, "image": image}).encode()
        layers = [f"{image} {arch} layer {i}".encode() * 1000 for i in range(2)]
        for blob in (config, *layers):
            Hub.blobs[_sha(blob)] = blob
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": _sha(config),
                    "size": len(config),
                },
                "layers": [
                    {
                        "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": _sha(b),
                        "size": len(b),
                    }
                    for b in layers
                ],
            }
        ).encode()
        Hub.manifests[_sha(manifest)] = (manifest, OCI_MANIFEST)
        entries.append(
            {
                "mediaType": OCI_MANIFEST,
                "digest": _sha(manifest),
                "size": len(manifest),
                "platform": {"os": "linux", "architecture": arch},
            }
        )
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}).encode()
    Hub.manifests[_sha(index)] = (index, OCI_INDEX)
    return _sha(index)


@pytest.fixture
def hub() -> Iterator[str]:
    Hub.manifests, Hub.blobs, Hub.gets = {}, {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def docker_hub_images(hub, project) -> dict[str, str]:
    """The platform's Docker Hub images published on the stub, their digests recorded as
    `mlp images resolve` records them."""
    images = [
        i
        for i in platform_images(settings_from_cdk_json(str(project)))
        if i.startswith("docker.io/")
    ]
    digests = {image: _publish(image) for image in images}
    project.with_name("cdk.context.json").write_text(json.dumps({IMAGE_DIGESTS_KEY: digests}))
    return digests


def test_mirror_copies_by_digest_and_synthesis_pulls_the_copies(
    aws, hub, project, mlp, docker_hub_images
) -> None:
    assert {i.rsplit(":", 1)[0] for i in docker_hub_images} == {
        "docker.io/volcanosh/vc-scheduler",
        "docker.io/volcanosh/vc-controller-manager",
        "docker.io/volcanosh/vc-webhook-manager",
        "docker.io/tensorflow/tensorflow",
    }
    result = mlp("--cdk-json", project, "images", "mirror", "--endpoint", f"docker.io={hub}")
    assert result.code == 0, result.out + result.err

    settings = settings_from_cdk_json(str(project))
    mirror = (
        f"{settings.env.account}.dkr.ecr.{settings.env.region}.amazonaws.com/ml-platform-mirror"
    )
    context = json.loads(project.with_name("cdk.context.json").read_text())
    assert context[IMAGE_MIRRORS_KEY] == {"docker.io": mirror}
    assert settings.images.mirrors == {"docker.io": mirror}

    ecr = boto3.client("ecr", region_name=settings.env.region)
    for image, digest in docker_hub_images.items():
        repository, tag = image.removeprefix("docker.io/").rsplit(":", 1)
        name = f"ml-platform-mirror/{repository}"
        (repo,) = ecr.describe_repositories(repositoryNames=[name])["repositories"]
        assert repo["imageTagMutability"] == "IMMUTABLE"
        (by_tag,) = ecr.batch_get_image(repositoryName=name, imageIds=[{"imageTag": tag}])["images"]
        # The same bytes, so the same digest: pulls by the recorded digest find it.
        assert by_tag["imageManifest"].encode() == Hub.manifests[digest][0]
        index = json.loads(by_tag["imageManifest"])
        for entry in index["manifests"]:
            child = json.loads(Hub.manifests[entry["digest"]][0])
            blobs = [child["config"]["digest"], *(layer["digest"] for layer in child["layers"])]
            layers = ecr.batch_check_layer_availability(repositoryName=name, layerDigests=blobs)
            assert {x["layerDigest"] for x in layers["layers"]} == set(blobs)
        assert settings.image_policy.resolve(image) == f"{mirror}/{repository}:{tag}@{digest}"

    # Again: every blob is already there, nothing is downloaded but the manifests.
    Hub.gets.clear()
    again = mlp("--cdk-json", project, "images", "mirror", "--endpoint", f"docker.io={hub}")
    assert again.code == 0, again.out + again.err
    assert not [g for g in Hub.gets if "/blobs/" in g]
    assert again.out.count("0 blobs uploaded") == len(docker_hub_images)


def test_a_blob_that_does_not_match_its_digest_stops_the_copy(
    aws, hub, project, mlp, docker_hub_images
) -> None:
    victim = next(iter(Hub.blobs))
    Hub.blobs[victim] = b"tampered"
    result = mlp("--cdk-json", project, "images", "mirror", "--endpoint", f"docker.io={hub}")
    assert result.code != 0
    assert f"blob {victim}: content does not match its digest" in result.out + result.err
    assert IMAGE_MIRRORS_KEY not in json.loads(project.with_name("cdk.context.json").read_text())


def test_an_image_without_a_digest_is_refused_before_any_aws_call(project, mlp) -> None:
    result = mlp("--cdk-json", project, "images", "mirror", "--dry-run")
    assert result.code != 0
    assert (
        "docker.io/tensorflow/tensorflow:2.20.0: no digest known; run `mlp images resolve` first"
        in result.out + result.err
    )


def test_prefix_is_checked(project, mlp) -> None:
    result = mlp("--cdk-json", project, "images", "mirror", "--prefix", "Bad Prefix/")
    assert result.code != 0
    assert "--prefix 'Bad Prefix/': expected lower-case letters" in result.out + result.err


def test_a_mirror_in_cdk_json_wins_over_the_recorded_one(project) -> None:
    context = json.loads(project.read_text())
    context["context"]["ml-platform"]["images"] = {"mirrors": {"docker.io": "mine.example/hub"}}
    project.write_text(json.dumps(context))
    project.with_name("cdk.context.json").write_text(
        json.dumps(
            {IMAGE_MIRRORS_KEY: {"docker.io": "recorded.example/hub", "quay.io": "q.example/q"}}
        )
    )
    mirrors = settings_from_cdk_json(str(project)).images.mirrors
    assert mirrors == {"docker.io": "mine.example/hub", "quay.io": "q.example/q"}
    project.with_name("cdk.context.json").write_text(
        json.dumps({IMAGE_MIRRORS_KEY: {"ghcr.io": "x.example/g"}})
    )
    with pytest.raises(ValueError, match=r"images\.mirrors\.ghcr\.io: unknown registry"):
        settings_from_cdk_json(str(project))
