"""``mlp charts fetch``: download Volcano's pinned Helm chart, verify it, and unpack it where
synthesis ships it as a chart asset.

Without it, the kubectl handler fetches the chart from the Helm repository by version at
deploy time, so whatever the repository serves under that version then runs, its hooks with
cluster-admin. With it, the chart is checked once here and deployed from the stack's own
asset bucket:

1. the repository's ``index.yaml`` must list ``volcano`` at the pinned version with the pinned
   SHA-256 as its ``digest`` (Helm's index records the archive's SHA-256 there:
   https://helm.sh/docs/topics/chart_repository/#the-index-file);
2. the archive it names is downloaded and its SHA-256 must be the pinned one too
   (``ml_platform.versions.VOLCANO_HELM_CHART_SHA256``);
3. it is unpacked with the project's safe extractor (regular files and folders only, no
   ``..`` or links) into ``.charts/volcano-<version>/`` beside cdk.json, which synthesis
   then uploads as the chart's asset (``.charts/`` is not committed: it is fetched code).

Needs network access to the repository and GitHub release downloads; run it again after
raising the pinned version.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from ml_platform.cli.aws import CliError, Context, Subcommands, doc_summary
from ml_platform.versions import volcano_chart_dir

TIMEOUT = 60
MAX_CHART_BYTES = 50 * 1024 * 1024  # the 1.15.1 archive is well under 1 MB; bounds a bad answer


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
        help="download, verify and unpack Volcano's pinned chart",
        description=doc_summary(__doc__),
    )
    fetch.add_argument("--repository", help="Helm repository URL (default: Volcano's own)")
    fetch.set_defaults(run=run_fetch)
    charts.set_defaults(help_of=charts)


def _get(url: str, limit: int) -> bytes:
    if not url.startswith(("https://", "http://")):
        raise CliError(f"{url}: expected an http(s) URL")
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
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


def fetch_chart(repository: str, chart: str, version: str, sha256: str, dest: Path) -> Path:
    """Download ``chart`` ``version`` from ``repository``, verify it against ``sha256`` (in the
    index and of the bytes), unpack it safely and move its folder to ``dest``."""
    from ml_platform.triton.archive_safety import ArchiveSafetyError, extract_archive

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
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp, "chart.tgz")
        archive.write_bytes(data)
        unpacked = Path(tmp, "unpacked")
        unpacked.mkdir()
        try:
            folders = extract_archive(archive, unpacked)
        except ArchiveSafetyError as error:
            raise CliError(f"{url}: {error}") from None
        if folders != [chart] or not (unpacked / chart / "Chart.yaml").is_file():
            raise CliError(f"{url}: expected one folder {chart}/ holding Chart.yaml, got {folders}")
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(unpacked / chart), dest)
    return dest


def run_fetch(ctx: Context, args: argparse.Namespace) -> int:
    from ml_platform.versions import (
        VOLCANO_HELM_CHART,
        VOLCANO_HELM_CHART_SHA256,
        VOLCANO_HELM_CHART_VERSION,
        VOLCANO_HELM_REPOSITORY,
    )

    dest = volcano_chart_dir(ctx.cdk_json.resolve().parent)
    fetch_chart(
        args.repository or VOLCANO_HELM_REPOSITORY,
        VOLCANO_HELM_CHART,
        VOLCANO_HELM_CHART_VERSION,
        VOLCANO_HELM_CHART_SHA256,
        dest,
    )
    print(
        f"{VOLCANO_HELM_CHART} {VOLCANO_HELM_CHART_VERSION}: sha256 {VOLCANO_HELM_CHART_SHA256} "
        f"verified (index and archive); unpacked into {dest}. Synthesis now ships it as the "
        "chart's asset."
    )
    return 0
