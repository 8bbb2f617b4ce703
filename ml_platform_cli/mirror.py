"""``mlp images mirror``: copy the pinned public images into the account's ECR, by digest.

Docker Hub lets anonymous clients pull 10 times an hour per IPv4 address (docker/docs, "Docker
Hub usage and limits": https://docs.docker.com/docker-hub/usage/), and every node of the
cluster pulls through the one NAT gateway address: a new node group, Volcano's release (whose
pods the Helm install waits on) or a rollout can exceed it, and an ``ImagePullBackOff`` then
rolls the cluster stack back. An ECR pull-through cache needs Docker Hub credentials for
Docker Hub (ECR user guide, "Creating a pull through cache rule"); this command needs none.

For each image of the chosen public registries (default ``docker.io``) that the settings make
the platform pull, with its digest known (``mlp images resolve``):

1. the manifest the digest names is fetched from the public registry (OCI distribution API,
   anonymous token), its bytes checked against the digest; for an index, every manifest it
   lists, each checked against its own digest;
2. every blob (config and layers) that ECR lacks (``ecr:BatchCheckLayerAvailability``) is
   streamed from the registry, checked against its digest, and uploaded with
   ``ecr:InitiateLayerUpload`` / ``UploadLayerPart`` / ``CompleteLayerUpload``;
3. the manifests are put with ``ecr:PutImage`` byte for byte, so the digests stay the same:
   the children by digest, the image itself with its tag, into
   ``<prefix>/<repository>`` (created with immutable tags and scan on push when missing).

Then ``images.mirrors`` maps each registry to ``<account>.dkr.ecr.<region>.amazonaws.com/<prefix>``
in ``cdk.context.json`` (key ``ml-platform:image-mirrors``; a mirror set in ``cdk.json`` wins),
and synthesis pulls ``<mirror>/<repository>:<tag>@<digest>``: the same content, from the
account. Run it again after raising a pinned version; blobs already in ECR are not copied again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ml_platform.image_pins import DIGEST, MIRRORABLE_REGISTRIES, ImageReference
from ml_platform.regions import ecr_registry
from ml_platform_cli.aws import CliError, Context, error_message, one_line
from ml_platform_cli.registry import (
    MANIFEST_TYPES,
    Fetch,
    bearer_token,
    open_url,
    registry_endpoints,
)

# An ECR repository name prefix (CreateRepository repositoryName, without the last part).
PREFIX = re.compile(r"[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*")
DEFAULT_PREFIX = "ml-platform-mirror"
DEFAULT_REGISTRIES = ("docker.io",)
PART_BYTES = 20 * 1024 * 1024
"""Bytes per ``ecr:UploadLayerPart`` (ECR takes parts of at least 5 MiB but the last, at most
10 GiB in all; https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_UploadLayerPart.html)."""
INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)


@dataclass(frozen=True)
class Copied:
    """What one image's copy did: blobs uploaded, and blobs ECR already had."""

    image: str
    target: str
    uploaded: int
    present: int


class Registry:
    """Reads manifests and blobs of one public registry by digest (anonymous bearer token on
    a 401 challenge, as ``mlp images resolve`` does), checking every body against its digest."""

    def __init__(self, base_url: str, repository: str, fetch: Fetch) -> None:
        self._base = base_url.rstrip("/")
        self._repository = repository
        self._fetch = fetch
        self._accept = ", ".join(MANIFEST_TYPES)
        self._token: str | None = None

    def _get(self, path: str, accept: str | None = None) -> Any:
        url = f"{self._base}/v2/{self._repository}/{path}"
        for attempt in (1, 2):
            headers = {"Accept": accept} if accept else {}
            if self._token:
                headers["Authorization"] = f"Bearer {self._token}"
            try:
                return self._fetch(urllib.request.Request(url, headers=headers))
            except urllib.error.HTTPError as error:
                challenge = error.headers.get("WWW-Authenticate", "") if error.headers else ""
                if error.code == 401 and attempt == 1:
                    try:
                        self._token = bearer_token(challenge, self._fetch)
                    except (urllib.error.URLError, OSError, ValueError) as token_error:
                        raise CliError(f"{url}: no anonymous token ({token_error})") from None
                    if self._token:
                        continue
                raise CliError(f"{url}: HTTP {error.code}") from None
            except (urllib.error.URLError, OSError) as error:
                raise CliError(f"{url}: {getattr(error, 'reason', error)}") from None
        raise CliError(f"{url}: no anonymous token")  # pragma: no cover (loop returns)

    def manifest(self, digest: str) -> tuple[bytes, str]:
        """The manifest ``digest`` names: its bytes (checked) and media type."""
        with self._get(f"manifests/{digest}", self._accept) as response:
            body: bytes = response.read()
            media_type = response.headers.get("Content-Type", "")
        _check(body, digest, f"{self._repository} manifest")
        if not media_type or media_type == "application/json":
            media_type = json.loads(body).get("mediaType", "")
        return body, media_type

    def blob_parts(self, digest: str, part_bytes: int = PART_BYTES) -> Iterator[bytes]:
        """The blob ``digest`` names in parts; raises CliError (after the last part) when its
        bytes do not hash to the digest."""
        sha = hashlib.sha256()
        with self._get(f"blobs/{digest}") as response:
            while part := response.read(part_bytes):
                sha.update(part)
                yield part
        if f"sha256:{sha.hexdigest()}" != digest:
            raise CliError(f"{self._repository} blob {digest}: content does not match its digest")


def _check(body: bytes, digest: str, what: str) -> None:
    if f"sha256:{hashlib.sha256(body).hexdigest()}" != digest:
        raise CliError(f"{what} {digest}: content does not match its digest")


def _blobs(manifest: Mapping[str, Any]) -> list[str]:
    """The config and layer digests of an image manifest."""
    out = [manifest["config"]["digest"]] if "config" in manifest else []
    return out + [layer["digest"] for layer in manifest.get("layers", [])]


def ensure_repository(ecr: Any, name: str) -> None:
    """Create ECR repository ``name`` (immutable tags, scan on push, AES256) if missing."""
    try:
        ecr.describe_repositories(repositoryNames=[name])
        return
    except Exception as error:
        if "RepositoryNotFoundException" not in type(error).__name__ + str(error):
            raise CliError(f"{name}: ecr:DescribeRepositories failed: {_why(error)}") from None
    try:
        ecr.create_repository(
            repositoryName=name,
            imageTagMutability="IMMUTABLE",
            imageScanningConfiguration={"scanOnPush": True},
            encryptionConfiguration={"encryptionType": "AES256"},
        )
    except Exception as error:
        raise CliError(f"{name}: ecr:CreateRepository failed: {_why(error)}") from None


def _why(error: Exception) -> str:
    return one_line(error_message(error))


def upload_blob(ecr: Any, repository: str, digest: str, parts: Iterator[bytes]) -> None:
    """One blob into ``repository`` with the layer-upload API."""
    upload = ecr.initiate_layer_upload(repositoryName=repository)
    upload_id = upload["uploadId"]
    first = 0
    for part in parts:
        ecr.upload_layer_part(
            repositoryName=repository,
            uploadId=upload_id,
            partFirstByte=first,
            partLastByte=first + len(part) - 1,
            layerPartBlob=part,
        )
        first += len(part)
    ecr.complete_layer_upload(repositoryName=repository, uploadId=upload_id, layerDigests=[digest])


def _missing(ecr: Any, repository: str, digests: list[str]) -> list[str]:
    if not digests:
        return []
    answer = ecr.batch_check_layer_availability(repositoryName=repository, layerDigests=digests)
    present = {
        layer["layerDigest"]
        for layer in answer.get("layers", [])
        if layer.get("layerAvailability") == "AVAILABLE"
    }
    return [d for d in dict.fromkeys(digests) if d not in present]


def _put_image(
    ecr: Any, repository: str, body: bytes, media_type: str, digest: str, tag: str | None
) -> None:
    args: dict[str, Any] = {
        "repositoryName": repository,
        "imageManifest": body.decode("utf-8"),
        "imageManifestMediaType": media_type,
        "imageDigest": digest,
    }
    if tag:
        args["imageTag"] = tag
    try:
        ecr.put_image(**args)
    except Exception as error:
        # Already there with this tag and digest (immutable tags): nothing to do.
        if "ImageAlreadyExistsException" in type(error).__name__ + str(error):
            return
        raise CliError(f"{repository}@{digest}: ecr:PutImage failed: {_why(error)}") from None


def copy_image(image: str, digest: str, *, registry: Registry, ecr: Any, repository: str) -> Copied:
    """Copy ``image`` (``registry/repository:tag``) at ``digest`` into ECR ``repository``."""
    ref = ImageReference.parse(image)
    ensure_repository(ecr, repository)
    body, media_type = registry.manifest(digest)
    manifest = json.loads(body)
    children: list[tuple[bytes, str, str]] = []
    blobs: list[str] = []
    if media_type in INDEX_TYPES:
        for entry in manifest.get("manifests", []):
            child, child_type = registry.manifest(entry["digest"])
            children.append((child, child_type, entry["digest"]))
            blobs += _blobs(json.loads(child))
    else:
        blobs += _blobs(manifest)
    missing = _missing(ecr, repository, blobs)
    for blob in missing:
        upload_blob(ecr, repository, blob, registry.blob_parts(blob))
    for child, child_type, child_digest in children:
        _put_image(ecr, repository, child, child_type, child_digest, None)
    _put_image(ecr, repository, body, media_type, digest, ref.tag)
    target = f"{repository}:{ref.tag}@{digest}"
    return Copied(image, target, len(missing), len(set(blobs)) - len(missing))


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    mirror = commands.add_parser(
        "mirror",
        parents=parents,
        help="copy the pinned public images into this account's ECR by digest and record "
        "images.mirrors",
        description=(__doc__ or "").split("\n\n")[0],
    )
    mirror.add_argument(
        "--registry",
        action="append",
        choices=MIRRORABLE_REGISTRIES,
        help=f"public registry to mirror (default {', '.join(DEFAULT_REGISTRIES)}); repeatable",
    )
    mirror.add_argument(
        "--prefix",
        default=DEFAULT_PREFIX,
        help=f"ECR repository prefix of the copies (default {DEFAULT_PREFIX})",
    )
    mirror.add_argument(
        "--endpoint",
        action="append",
        default=[],
        metavar="REGISTRY=URL",
        help="reach REGISTRY's API at URL instead; repeatable",
    )
    mirror.add_argument("--dry-run", action="store_true", help="print what would be copied")
    mirror.set_defaults(run=run_mirror)


def mirror_plan(
    settings: Any, registries: tuple[str, ...]
) -> tuple[list[tuple[str, str]], list[str]]:
    """(image, digest) of every image of ``registries`` the platform pulls, and one problem
    per such image without a known digest."""
    from ml_platform.pulled_images import platform_images

    policy = settings.image_policy
    plan, problems = [], []
    for image in platform_images(settings):
        ref = ImageReference.parse(image)
        if ref.registry not in registries:
            continue
        digest = policy.digest(image)
        if digest is None or not DIGEST.fullmatch(digest):
            problems.append(f"{image}: no digest known; run `mlp images resolve` first")
        else:
            plan.append((image, digest))
    return plan, problems


def run_mirror(ctx: Context, args: argparse.Namespace, fetch: Fetch | None = None) -> int:
    registries = tuple(args.registry or DEFAULT_REGISTRIES)
    if len(args.prefix) > 100 or not PREFIX.fullmatch(args.prefix):
        raise CliError(
            f"--prefix {args.prefix!r}: expected lower-case letters, digits and '.', '_', '-', "
            "'/' between them (an ECR repository name prefix)"
        )
    endpoints = registry_endpoints(args.endpoint)
    settings = ctx.settings
    plan, problems = mirror_plan(settings, registries)
    if problems:
        raise CliError("; ".join(problems))
    account, region = settings.env.account, settings.env.region
    mirror = f"{ecr_registry(account, region)}/{args.prefix}"
    mirrors = {registry: mirror for registry in registries}
    for image, digest in plan:
        ref = ImageReference.parse(image)
        print(f"{image}@{digest} -> {mirror}/{ref.repository}:{ref.tag}")
    if args.dry_run:
        print(f"--dry-run: would copy {len(plan)} images and record images.mirrors {mirrors}")
        return 0
    ecr = ctx.client("ecr", region)
    for image, digest in plan:
        ref = ImageReference.parse(image)
        base = endpoints.get(ref.registry, f"https://{ref.registry}")
        copied = copy_image(
            image,
            digest,
            registry=Registry(base, ref.repository, fetch or open_url),
            ecr=ecr,
            repository=f"{args.prefix}/{ref.repository}",
        )
        print(f"copied {image}: {copied.uploaded} blobs uploaded, {copied.present} already there")
    _record(ctx, mirrors)
    return 0


def _record(ctx: Context, mirrors: Mapping[str, str]) -> None:
    """Write ``mirrors`` into cdk.context.json under ``ml-platform:image-mirrors``."""
    from ml_platform.config import IMAGE_MIRRORS_KEY, ImageSettings

    invalid = ImageSettings(mirrors=dict(mirrors)).problems()
    if invalid:
        raise CliError("the mirrors would be invalid, nothing written: " + "; ".join(invalid))
    path = ctx.cdk_json.with_name("cdk.context.json")
    local: dict[str, Any] = {}
    if path.is_file():
        try:
            local = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            raise CliError(f"{path}: not valid JSON ({str(error)[:120]})") from None
        if not isinstance(local, dict):
            raise CliError(f"{path}: expected a JSON object")
    previous = local.get(IMAGE_MIRRORS_KEY)
    merged = {**(previous if isinstance(previous, dict) else {}), **mirrors}
    local[IMAGE_MIRRORS_KEY] = dict(sorted(merged.items()))
    path.write_text(json.dumps(local, indent=2) + "\n")
    print(f"wrote images.mirrors {dict(mirrors)} to {path} (key {IMAGE_MIRRORS_KEY!r})")
