"""Fixtures of the training workload tests: the manifests are built once per session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ml_platform.config import Settings
from ml_platform.k8s_charts.workloads import build_workload_manifests


@pytest.fixture(scope="session")
def settings() -> Settings:
    return Settings.from_context({})


@pytest.fixture(scope="session")
def trn1n_settings() -> Settings:
    return Settings.from_context({"trainium": {"instance_type": "trn1n.32xlarge"}})


@pytest.fixture(scope="session")
def trn2_settings() -> Settings:
    return Settings.from_context({"trainium": {"instance_type": "trn2.48xlarge"}})


@pytest.fixture
def cdk_json(tmp_path: Path, settings: Settings) -> Path:
    """A cdk.json with default settings and the AZ context they need."""
    path = tmp_path / "cdk.json"
    azs = {settings.availability_zones_context_key: list(settings.network.availability_zones)}
    path.write_text(json.dumps({"context": azs}))
    return path


@pytest.fixture(scope="session")
def manifests(settings: Settings) -> dict[str, list[dict[str, Any]]]:
    return build_workload_manifests(settings)


@pytest.fixture(scope="session")
def trn1n_manifests(trn1n_settings: Settings) -> dict[str, list[dict[str, Any]]]:
    return build_workload_manifests(trn1n_settings)


@pytest.fixture(scope="session")
def trn2_manifests(trn2_settings: Settings) -> dict[str, list[dict[str, Any]]]:
    return build_workload_manifests(trn2_settings)


def _volcano_jobs(manifests: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return {
        doc["metadata"]["name"]: doc
        for docs in manifests.values()
        for doc in docs
        if doc["apiVersion"] == "batch.volcano.sh/v1alpha1"
    }


@pytest.fixture(scope="session")
def volcano_jobs(manifests: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Every Volcano Job of the default manifests, by name."""
    return _volcano_jobs(manifests)


@pytest.fixture(scope="session")
def trn1n_volcano_jobs(
    trn1n_manifests: dict[str, list[dict[str, Any]]],
) -> dict[str, dict[str, Any]]:
    """Every Volcano Job of the trn1n manifests, by name."""
    return _volcano_jobs(trn1n_manifests)


@pytest.fixture(scope="session")
def trn2_volcano_jobs(
    trn2_manifests: dict[str, list[dict[str, Any]]],
) -> dict[str, dict[str, Any]]:
    """Every Volcano Job of the trn2.48xlarge manifests, by name."""
    return _volcano_jobs(trn2_manifests)
