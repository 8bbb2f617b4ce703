"""The container-registry client that ``mlp images resolve`` and ``mlp images mirror`` share:
the media types asked for, the anonymous bearer-token handshake and the ``--endpoint``
overrides. Its own module so that :mod:`ml_platform_cli.images` and
:mod:`ml_platform_cli.mirror` do not import each other."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from ml_platform_cli.aws import CliError

__all__ = [
    "MANIFEST_TYPES",
    "REGISTRY_ENDPOINTS",
    "TIMEOUT",
    "Fetch",
    "bearer_token",
    "open_url",
    "registry_endpoints",
]

# Where each public registry's API is (Docker Hub's is not at its image-name host).
REGISTRY_ENDPOINTS = {"docker.io": "https://registry-1.docker.io"}
# Index and single-platform manifests, OCI and Docker: the registry answers with the kind the
# tag names, and its digest is the one a pull by tag resolves to.
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')
TIMEOUT = 30

Fetch = Callable[[urllib.request.Request], Any]


def open_url(request: urllib.request.Request) -> Any:
    """What a :data:`Fetch` is by default: ``urlopen`` with :data:`TIMEOUT`."""
    return urllib.request.urlopen(request, timeout=TIMEOUT)


def bearer_token(challenge: str, fetch: Fetch) -> str | None:
    """The anonymous token a ``WWW-Authenticate: Bearer realm=...,service=...,scope=...``
    challenge offers (the registry token protocol)."""
    if not challenge.lower().startswith("bearer "):
        return None
    params = dict(_CHALLENGE_PARAM.findall(challenge))
    realm = params.pop("realm", None)
    if not realm:
        return None
    url = f"{realm}?{urllib.parse.urlencode(params)}" if params else realm
    with fetch(urllib.request.Request(url, headers={"Accept": "application/json"})) as response:
        body = json.loads(response.read().decode("utf-8"))
    token: str | None = body.get("token") or body.get("access_token")
    return token


def registry_endpoints(values: list[str]) -> dict[str, str]:
    """:data:`REGISTRY_ENDPOINTS` with the ``--endpoint REGISTRY=URL`` values over them."""
    out = dict(REGISTRY_ENDPOINTS)
    for value in values:
        registry, sep, url = value.partition("=")
        if not sep or not url.startswith(("https://", "http://")):
            raise CliError(f"--endpoint {value!r}: expected REGISTRY=https://HOST[:PORT]")
        out[registry] = url
    return out
