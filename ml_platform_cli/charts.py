"""``mlp charts fetch``: download the Helm charts the platform pins (Volcano's and Neuron's),
verify them, and unpack them where synthesis ships them as chart assets.

Without it, the kubectl handler fetches each chart from its repository by version at deploy
time, so whatever the repository serves under that version then runs, with cluster-admin.
With it, each chart is checked once here and deployed from the stack's own asset bucket.

Volcano's chart (a Helm repository over HTTPS):

1. the repository's ``index.yaml`` must list ``volcano`` at the pinned version with the pinned
   SHA-256 as its ``digest`` (Helm's index records the archive's SHA-256 there:
   https://helm.sh/docs/topics/chart_repository/#the-index-file);
2. the archive it names is downloaded and its SHA-256 must be the pinned one too
   (``ml_platform.versions.VOLCANO_HELM_CHART_SHA256``).

Neuron's chart (an OCI artifact on ECR Public, ``oci://public.ecr.aws/neuron/neuron-helm-chart``):

1. an anonymous pull token from the registry's token endpoint
   (``/token/?scope=repository:neuron/neuron-helm-chart:pull``);
2. the OCI manifest of the pinned tag, whose SHA-256 must be the pinned manifest digest
   (``ml_platform.versions.NEURON_HELM_CHART_MANIFEST_DIGEST``; OCI content addressing:
   https://github.com/opencontainers/image-spec/blob/main/descriptor.md#digests);
3. its one layer of media type ``application/vnd.cncf.helm.chart.content.v1.tar+gzip`` (Helm's
   chart layer: helm/helm ``pkg/registry/constants.go``), downloaded, whose SHA-256 must be the
   digest the manifest states for it, and the pinned archive SHA-256 when one is pinned
   (``NEURON_HELM_CHART_SHA256``). No public source states that archive digest, so the first
   fetch records the one it verified in ``.charts/neuron-helm-chart-<version>.sha256`` and every
   later fetch requires it.

Each archive is unpacked with the project's safe extractor (regular files and folders only, no
``..`` or links) into ``.charts/<chart>-<version>/`` beside cdk.json, which synthesis then uploads
as the chart's asset (``.charts/`` is not committed: it is fetched code).

Needs network access to the repositories; run it again after raising a pinned version.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from ml_platform.versions import neuron_chart_dir, volcano_chart_dir
from ml_platform_cli.aws import CliError, Context, Subcommands, doc_summary

TIMEOUT = 60
MAX_CHART_BYTES = 50 * 1024 * 1024  # the pinned archives are well under 1 MB; bounds a bad answer
MAX_MANIFEST_BYTES = 4 * 1024 * 1024  # the OCI distribution spec's suggested manifest limit
CHARTS = ("volcano", "neuron")
DEFAULT_REGISTRY = "https://public.ecr.aws"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")


def add_parser(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    charts = sub.add_parser(
        "charts",
        help="fetch and verify the Helm charts the platform ships",
        description=doc_summary(__doc__),
    )
    commands = charts.add_subparsers(title="commands", metavar="COMMAND")
    fetch = commands.add_parser(
        "fetch",
        parents=parents,
        help="download, verify and unpack the pinned charts (Volcano's and Neuron's)",
        description=doc_summary(__doc__),
    )
    fetch.add_argument("--only", choices=CHARTS, help="fetch one chart only (default: every chart)")
    fetch.add_argument("--repository", help="Volcano's Helm repository URL (default: its own)")
    fetch.add_argument(
        "--registry",
        default=DEFAULT_REGISTRY,
        help=f"OCI registry of Neuron's chart, as a URL (default: {DEFAULT_REGISTRY})",
    )
    fetch.set_defaults(run=run_fetch)
    charts.set_defaults(help_of=charts)


def _get(url: str, limit: int, headers: dict[str, str] | None = None) -> bytes:
    if not url.startswith(("https://", "http://")):
        raise CliError(f"{url}: expected an http(s) URL")
    request = urllib.request.Request(url)
    for name, value in (headers or {}).items():
        # Not carried over a redirect: registries send blob downloads to storage elsewhere,
        # which must not receive the registry's token.
        request.add_unredirected_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            data: bytes = response.read(limit + 1)
    except urllib.error.HTTPError as error:
        raise CliError(f"{url}: HTTP {error.code}") from None
    except (urllib.error.URLError, OSError) as error:
        raise CliError(f"{url}: cannot download ({getattr(error, 'reason', error)})") from None
    if len(data) > limit:
        raise CliError(f"{url}: larger than {limit} bytes")
    return data


def index_entry(index_text: str, chart: str, version: str) -> dict[str, Any]:
    """The ``entries.<chart>`` item of a Helm repository index at ``version``."""
    import yaml

    try:
        index = yaml.safe_load(index_text)
    except yaml.YAMLError as error:
        raise CliError(f"index.yaml: not valid YAML ({str(error)[:120]})") from None
    entries = (index or {}).get("entries", {}).get(chart) if isinstance(index, dict) else None
    for entry in entries or []:
        if isinstance(entry, dict) and str(entry.get("version")) == version:
            return entry
    raise CliError(f"index.yaml lists no {chart} chart at version {version}")


def _unpack(data: bytes, source: str, chart: str, dest: Path, version: str | None = None) -> Path:
    """Unpack a chart archive safely and move its folder ``chart/`` to ``dest``; with
    ``version``, its Chart.yaml must name ``chart`` at that version."""
    import yaml

    from ml_platform.triton.archive_safety import ArchiveSafetyError, extract_archive

    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp, "chart.tgz")
        archive.write_bytes(data)
        unpacked = Path(tmp, "unpacked")
        unpacked.mkdir()
        try:
            folders = extract_archive(archive, unpacked)
        except ArchiveSafetyError as error:
            raise CliError(f"{source}: {error}") from None
        chart_yaml = unpacked / chart / "Chart.yaml"
        if folders != [chart] or not chart_yaml.is_file():
            raise CliError(
                f"{source}: expected one folder {chart}/ holding Chart.yaml, got {folders}"
            )
        if version is not None:
            try:
                meta = yaml.safe_load(chart_yaml.read_text())
            except yaml.YAMLError:
                meta = None
            named = (meta.get("name"), str(meta.get("version"))) if isinstance(meta, dict) else None
            if named != (chart, version):
                raise CliError(
                    f"{source}: Chart.yaml names {named}, not ({chart!r}, {version!r}); nothing "
                    "written"
                )
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(unpacked / chart), dest)
    return dest


def fetch_chart(repository: str, chart: str, version: str, sha256: str, dest: Path) -> Path:
    """Download ``chart`` ``version`` from the Helm repository ``repository``, verify it against
    ``sha256`` (in the index and of the bytes), unpack it safely and move its folder to
    ``dest``."""
    index_url = f"{repository.rstrip('/')}/index.yaml"
    entry = index_entry(_get(index_url, MAX_CHART_BYTES).decode("utf-8", "replace"), chart, version)
    stated = str(entry.get("digest", ""))
    if stated != sha256:
        raise CliError(
            f"{index_url}: {chart} {version} has digest {stated or 'none'}, not the pinned "
            f"{sha256}: the repository serves another archive under this version; nothing written"
        )
    urls = entry.get("urls") or []
    if not urls:
        raise CliError(f"{index_url}: {chart} {version} lists no download URL")
    url = urllib.parse.urljoin(index_url, str(urls[0]))
    data = _get(url, MAX_CHART_BYTES)
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise CliError(f"{url}: SHA-256 {actual}, not the pinned {sha256}; nothing written")
    return _unpack(data, url, chart, dest)


def archive_record(dest: Path) -> Path:
    """Where :func:`fetch_oci_chart` records the archive SHA-256 it verified for ``dest``."""
    return dest.with_name(f"{dest.name}.sha256")


def chart_layer_digest(manifest: bytes, source: str) -> str:
    """The ``sha256:...`` digest of the one Helm chart layer of an OCI image manifest."""
    try:
        parsed = json.loads(manifest)
    except ValueError:
        parsed = None
    layers = parsed.get("layers") if isinstance(parsed, dict) else None
    charts = [
        layer
        for layer in (layers if isinstance(layers, list) else [])
        if isinstance(layer, dict) and layer.get("mediaType") == CHART_LAYER
    ]
    if len(charts) != 1:
        raise CliError(
            f"{source}: expected one layer of media type {CHART_LAYER}, got {len(charts)}"
        )
    digest = str(charts[0].get("digest", ""))
    if not _SHA256.fullmatch(digest):
        raise CliError(
            f"{source}: chart layer digest {digest!r} is not 'sha256:' and 64 hex digits"
        )
    return digest


def fetch_oci_chart(
    registry: str,
    repository: str,
    tag: str,
    manifest_digest: str,
    archive_sha256: str | None,
    chart: str,
    dest: Path,
) -> tuple[Path, str]:
    """Download ``repository:tag`` from the OCI registry at ``registry`` (a URL) with an
    anonymous token, verify manifest -> chart layer -> archive bytes against the pins, unpack it
    safely into ``dest`` and record the archive's SHA-256 beside it.

    ``archive_sha256`` (64 hex digits) is required of the layer when given; otherwise the record
    of an earlier fetch (:func:`archive_record`) is, when there is one.

    Returns:
        ``dest`` and the archive's SHA-256 (hex).
    """
    base = registry.rstrip("/")
    token_url = f"{base}/token/?scope=repository:{repository}:pull"
    try:
        token = json.loads(_get(token_url, 64 * 1024)).get("token")
    except (ValueError, AttributeError):
        token = None
    if not isinstance(token, str) or not token:
        raise CliError(f"{token_url}: no pull token in the answer")
    auth = {"Authorization": f"Bearer {token}"}
    manifest_url = f"{base}/v2/{repository}/manifests/{tag}"
    manifest = _get(manifest_url, MAX_MANIFEST_BYTES, {**auth, "Accept": OCI_MANIFEST})
    actual_manifest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    if actual_manifest != manifest_digest:
        raise CliError(
            f"{manifest_url}: manifest digest {actual_manifest}, not the pinned {manifest_digest}: "
            "the registry serves another chart under this tag; nothing written"
        )
    layer = chart_layer_digest(manifest, manifest_url)
    record = archive_record(dest)
    required = archive_sha256 or (record.read_text().strip() if record.is_file() else None)
    if required is not None and layer != f"sha256:{required}":
        source = "the pinned" if archive_sha256 else f"the recorded ({record})"
        raise CliError(
            f"{manifest_url}: chart archive {layer}, not {source} sha256:{required}; nothing "
            "written"
        )
    blob_url = f"{base}/v2/{repository}/blobs/{layer}"
    data = _get(blob_url, MAX_CHART_BYTES, auth)
    actual = "sha256:" + hashlib.sha256(data).hexdigest()
    if actual != layer:
        raise CliError(f"{blob_url}: SHA-256 {actual}, not the manifest's {layer}; nothing written")
    _unpack(data, blob_url, chart, dest, version=tag)
    record.write_text(layer.removeprefix("sha256:") + "\n")
    return dest, layer.removeprefix("sha256:")


def run_fetch(ctx: Context, args: argparse.Namespace) -> int:
    from ml_platform import versions

    project = ctx.cdk_json.resolve().parent
    only = getattr(args, "only", None)
    if only in (None, "volcano"):
        dest = volcano_chart_dir(project)
        fetch_chart(
            args.repository or versions.VOLCANO_HELM_REPOSITORY,
            versions.VOLCANO_HELM_CHART,
            versions.VOLCANO_HELM_CHART_VERSION,
            versions.VOLCANO_HELM_CHART_SHA256,
            dest,
        )
        print(
            f"{versions.VOLCANO_HELM_CHART} {versions.VOLCANO_HELM_CHART_VERSION}: sha256 "
            f"{versions.VOLCANO_HELM_CHART_SHA256} verified (index and archive); unpacked into "
            f"{dest}. Synthesis now ships it as the chart's asset."
        )
    if only in (None, "neuron"):
        dest, archive = fetch_oci_chart(
            getattr(args, "registry", None) or DEFAULT_REGISTRY,
            versions.NEURON_HELM_OCI_REPOSITORY,
            versions.NEURON_HELM_CHART_VERSION,
            versions.NEURON_HELM_CHART_MANIFEST_DIGEST,
            versions.NEURON_HELM_CHART_SHA256,
            versions.NEURON_HELM_CHART,
            neuron_chart_dir(project),
        )
        pinned = (
            "pinned"
            if versions.NEURON_HELM_CHART_SHA256
            else f"recorded in {archive_record(dest)}; pin it as NEURON_HELM_CHART_SHA256"
        )
        print(
            f"{versions.NEURON_HELM_CHART} {versions.NEURON_HELM_CHART_VERSION}: manifest "
            f"{versions.NEURON_HELM_CHART_MANIFEST_DIGEST} verified, archive sha256 {archive} "
            f"({pinned}); unpacked into {dest}. Synthesis now ships it as the chart's asset."
        )
    return 0
