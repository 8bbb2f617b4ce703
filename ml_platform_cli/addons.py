"""``mlp addons``: check the EKS add-on versions of the settings against what EKS offers.

Asks EKS (DescribeAddonVersions) for every add-on the platform installs, for the configured
Kubernetes version, and reports per add-on the version the platform asks for (a pin of
``ml_platform.versions``, a ``cluster.*_version`` setting, or EKS's default), whether EKS has
it, EKS's default version and the latest one. A pin EKS does not have would fail the add-on
at deploy and roll the stack back. Exit code 1 when a pinned version is missing.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import asdict, dataclass
from typing import Any

from ml_platform_cli.aws import CliError, Context, Subcommands, doc_summary


def add_parser(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "addons",
        parents=parents,
        help="check the pinned EKS add-on versions against EKS",
        description=doc_summary(__doc__),
    )
    p.add_argument("--kubernetes-version", help="default: cluster.kubernetes_version")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=run)


@dataclass(frozen=True)
class AddonReport:
    """One add-on: what the platform asks for and what EKS offers."""

    name: str
    requested: str | None  # None: EKS's default version
    requested_exists: bool | None  # None when nothing is pinned
    default: str | None
    latest: str | None
    versions: int


def _version_key(version: str) -> tuple[int, ...]:
    """``v1.21.1-eksbuild.3`` -> (1, 21, 1, 3), for picking the latest."""
    return tuple(int(n) for n in re.findall(r"\d+", version))


def addon_report(
    eks: Any, name: str, kubernetes_version: str, requested: str | None
) -> AddonReport:
    """Ask EKS about ``name`` on ``kubernetes_version`` (all pages)."""
    versions: list[str] = []
    default = None
    for page in eks.get_paginator("describe_addon_versions").paginate(
        addonName=name, kubernetesVersion=kubernetes_version
    ):
        for addon in page.get("addons", []):
            if addon.get("addonName") != name:
                continue
            for info in addon.get("addonVersions", []):
                version = info["addonVersion"]
                versions.append(version)
                for compat in info.get("compatibilities", []):
                    if compat.get("clusterVersion") == kubernetes_version and compat.get(
                        "defaultVersion"
                    ):
                        default = version
    latest = max(versions, key=_version_key) if versions else None
    return AddonReport(
        name=name,
        requested=requested,
        requested_exists=None if requested is None else requested in versions,
        default=default,
        latest=latest,
        versions=len(versions),
    )


def run(ctx: Context, args: argparse.Namespace) -> int:
    from ml_platform.versions import EKS_ADDON_VERSIONS

    settings = ctx.settings
    kubernetes_version = args.kubernetes_version or settings.cluster.kubernetes_version
    pins = EKS_ADDON_VERSIONS.get(kubernetes_version)
    if pins is None:
        raise CliError(
            f"Kubernetes {kubernetes_version}: add-on versions are pinned for "
            f"{sorted(EKS_ADDON_VERSIONS)}"
        )
    requested = {**pins, **settings.cluster.addon_versions}
    eks = ctx.client("eks")
    reports = [
        addon_report(eks, name, kubernetes_version, version)
        for name, version in sorted(requested.items())
    ]
    missing = [r for r in reports if r.requested_exists is False]
    if args.json:
        print(
            json.dumps(
                {
                    "region": ctx.region,
                    "kubernetes_version": kubernetes_version,
                    "addons": [asdict(r) for r in reports],
                },
                indent=2,
            )
        )
    else:
        _print_table(reports, ctx.region, kubernetes_version)
        for report in missing:
            print(
                f"{report.name}: {report.requested} does not exist for Kubernetes "
                f"{kubernetes_version} in {ctx.region}; default {report.default}, latest "
                f"{report.latest}"
            )
    return 1 if missing else 0


def _print_table(reports: list[AddonReport], region: str, kubernetes_version: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"EKS add-ons for Kubernetes {kubernetes_version} ({region})")
    for column in ("Add-on", "Requested", "Exists", "EKS default", "Latest"):
        table.add_column(column)
    for r in reports:
        exists = {None: "-", True: "yes", False: "NO"}[r.requested_exists]
        table.add_row(
            r.name, r.requested or "(EKS default)", exists, r.default or "-", r.latest or "-"
        )
    Console(width=120).print(table)
