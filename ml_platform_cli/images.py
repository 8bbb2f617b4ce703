"""``mlp images``: the container images the platform pulls, and their digests.

``mlp images list`` prints every image the settings make the platform pull, as pinned and as
pulled (mirror and digest applied), and which are still pinned by tag only.

``mlp images resolve`` asks each image's registry which manifest its tag names today and
records ``registry/repository:tag -> sha256:...`` in ``cdk.context.json`` under the key
``ml-platform:image-digests``; synthesis then pins every image by that digest (and
``mlp azs``, which rewrites the ``ml-platform`` object there, leaves the key alone):

- public registries (Docker Hub, ECR Public, NGC, Quay) through the OCI distribution API: a
  ``HEAD /v2/<repository>/manifests/<tag>`` whose ``Docker-Content-Digest`` header is the
  digest, with the anonymous bearer token the registry's ``WWW-Authenticate`` challenge
  offers (https://github.com/opencontainers/distribution-spec/blob/main/spec.md#pulling-manifests,
  https://distribution.github.io/distribution/spec/auth/token/);
- Amazon ECR registries (``<account>.dkr.ecr.<region>.amazonaws.com``: the EKS add-on images,
  SageMaker's) with your AWS credentials, ``ecr:BatchGetImage`` on the tag.

Images are resolved at their upstream registry, never through ``images.mirrors``: a
pull-through cache serves the same manifests, so the digest holds for both. The digest of a
multi-platform image is its index's; the node's runtime picks its platform's manifest from it.
Run it again after raising a pinned version.

``mlp images mirror`` copies the Docker Hub images into the account's ECR by digest and
records ``images.mirrors`` (:mod:`ml_platform_cli.mirror`).
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from ml_platform.image_pins import DIGEST, PUBLIC_DIGESTS, ImageReference
from ml_platform.pulled_images import platform_images
from ml_platform.regions import parse_ecr_registry
from ml_platform_cli.aws import CliError, Context, Subcommands, doc_summary, error_message, one_line
from ml_platform_cli.registry import (
    MANIFEST_TYPES,
    Fetch,
    bearer_token,
    open_url,
    registry_endpoints,
)


def add_parser(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    images = sub.add_parser(
        "images",
        help="list the images the platform pulls; resolve their tags to digests; mirror them",
        description=doc_summary(__doc__),
    )
    commands = images.add_subparsers(title="commands", metavar="COMMAND")
    listing = commands.add_parser(
        "list",
        parents=parents,
        help="every image, as pinned and as pulled",
        description="Every image the settings make the platform pull, as pinned and as pulled.",
    )
    listing.set_defaults(run=run_list)
    resolve = commands.add_parser(
        "resolve",
        parents=parents,
        help="ask the registries for each tag's digest and write them into cdk.context.json",
        description=doc_summary(__doc__),
    )
    resolve.add_argument(
        "--endpoint",
        action="append",
        default=[],
        metavar="REGISTRY=URL",
        help="reach REGISTRY's API at URL instead (e.g. docker.io=https://mirror.example); "
        "repeatable",
    )
    resolve.add_argument("--dry-run", action="store_true", help="print, write nothing")
    resolve.set_defaults(run=run_resolve)
    from ml_platform_cli import mirror

    mirror.add_parser(commands, parents)
    images.set_defaults(help_of=images)


def run_list(ctx: Context, args: argparse.Namespace) -> int:
    policy = ctx.settings.image_policy
    images = platform_images(ctx.settings)
    for image in images:
        pulled = policy.resolve(image)
        print(image if pulled == image else f"{image}\n    pulled as {pulled}")
    loose = policy.tag_only(images)
    if loose:
        print(f"pinned by tag only ({len(loose)}): run `mlp images resolve`")
    return 0


def registry_digest(ref: ImageReference, base_url: str, fetch: Fetch = open_url) -> str:
    """The digest ``ref``'s tag names at the registry API at ``base_url`` (OCI distribution
    ``HEAD /v2/<name>/manifests/<tag>``, anonymous bearer token on a 401 challenge)."""
    url = f"{base_url.rstrip('/')}/v2/{ref.repository}/manifests/{ref.tag}"
    headers = {"Accept": ", ".join(MANIFEST_TYPES)}
    for attempt in (1, 2):
        request = urllib.request.Request(url, method="HEAD", headers=headers)
        try:
            with fetch(request) as response:
                digest: str = response.headers.get("Docker-Content-Digest", "")
                break
        except urllib.error.HTTPError as error:
            challenge = error.headers.get("WWW-Authenticate", "") if error.headers else ""
            if error.code == 401 and attempt == 1:
                token = bearer_token(challenge, fetch)
                if token:
                    headers["Authorization"] = f"Bearer {token}"
                    continue
            if error.code == 404:
                raise CliError(f"{ref}: no such tag at {base_url}") from None
            raise CliError(f"{ref}: {base_url} answered HTTP {error.code}") from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise CliError(f"{ref}: cannot reach {base_url} ({reason})") from None
    if not DIGEST.fullmatch(digest):
        raise CliError(f"{ref}: {base_url} sent no sha256 Docker-Content-Digest header")
    return digest


def ecr_digest(ref: ImageReference, ecr: Any) -> str:
    """The digest of ``ref``'s tag in an Amazon ECR registry (``ecr:BatchGetImage``)."""
    registry = parse_ecr_registry(ref.registry)
    assert registry, ref.registry
    try:
        response = ecr.batch_get_image(
            registryId=registry[0],
            repositoryName=ref.repository,
            imageIds=[{"imageTag": ref.tag}],
            acceptedMediaTypes=list(MANIFEST_TYPES),
        )
    except Exception as error:  # botocore ClientError, credentials, endpoint
        raise CliError(
            f"{ref}: ecr:BatchGetImage failed: {one_line(error_message(error))}"
        ) from None
    images = response.get("images") or []
    if not images:
        reasons = [f.get("failureReason", "not found") for f in response.get("failures", [])]
        raise CliError(f"{ref}: ECR has no such tag ({'; '.join(reasons) or 'not found'})")
    digest: str = images[0]["imageId"]["imageDigest"]
    return digest


def resolve_all(
    images: list[str], ctx: Context, endpoints: Mapping[str, str], fetch: Fetch = open_url
) -> tuple[dict[str, str], list[str]]:
    """``tag -> digest`` for each image that resolved, and one problem line per other one."""
    found: dict[str, str] = {}
    problems: list[str] = []
    for image in images:
        ref = ImageReference.parse(image)
        if ref.tag is None:
            continue
        try:
            ecr = parse_ecr_registry(ref.registry)
            if ecr:
                found[ref.tagged] = ecr_digest(ref, ctx.client("ecr", ecr[1]))
            else:
                base = endpoints.get(ref.registry, f"https://{ref.registry}")
                found[ref.tagged] = registry_digest(ref, base, fetch)
        except CliError as error:
            problems.append(str(error))
    return found, problems


def run_resolve(ctx: Context, args: argparse.Namespace) -> int:
    from ml_platform.config import IMAGE_DIGESTS_KEY, ImageSettings

    endpoints = registry_endpoints(args.endpoint)
    settings = ctx.settings  # validates cdk.json (and cdk.context.json) first
    images = platform_images(settings)
    found, problems = resolve_all(images, ctx, endpoints)
    for image in images:
        tagged = ImageReference.parse(image).tagged
        if tagged in found:
            note = ""
            public = PUBLIC_DIGESTS.get(tagged)
            if public and public != found[tagged]:
                note = f" (differs from the public record {public}: the registry's is written)"
            print(f"{tagged} -> {found[tagged]}{note}")
    for problem in problems:
        print(f"not resolved: {problem}")

    local_path = ctx.cdk_json.with_name("cdk.context.json")
    local: dict[str, Any] = {}
    if local_path.is_file():
        try:
            local = json.loads(local_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            raise CliError(f"{local_path}: not valid JSON ({str(error)[:120]})") from None
        if not isinstance(local, dict):
            raise CliError(f"{local_path}: expected a JSON object")
    previous = local.get(IMAGE_DIGESTS_KEY)
    digests = {**(previous if isinstance(previous, dict) else {}), **found}
    invalid = ImageSettings(digests=digests).problems()
    if invalid:
        raise CliError("the digests would be invalid, nothing written: " + "; ".join(invalid))
    updated = {**local, IMAGE_DIGESTS_KEY: dict(sorted(digests.items()))}
    text = json.dumps(updated, indent=2) + "\n"
    if args.dry_run:
        print(f"--dry-run: would write {local_path} (key {IMAGE_DIGESTS_KEY!r})")
    elif found:
        local_path.write_text(text)
        print(f"wrote {len(found)} digests to {local_path} (key {IMAGE_DIGESTS_KEY!r})")
    return 1 if problems else 0
