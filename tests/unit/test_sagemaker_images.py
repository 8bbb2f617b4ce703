"""Where SageMaker publishes each Triton release, held to the SageMaker Python SDK's own data.

Source: ``image_uri_config/sagemaker-tritonserver.json`` inside the ``sagemaker-core`` wheel on
PyPI (:data:`ml_platform.sagemaker_images.SDK_SOURCE`). The bundled copy is checked against
its recorded sha256 always, and against the wheel itself whenever PyPI answers (``pip download
--no-deps``, ~1.4 MB, cached by pip); the table the project uses is derived from that copy.
The per-release facts that are not the SDK's (stub Python, TensorRT, ...) are in
ml_platform/triton/releases.py with their sources.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path

import pytest

from ml_platform.regions import REGIONS
from ml_platform.sagemaker_images import (
    DEFAULT_TRITON_VERSION,
    SDK_REGISTRY_FILE,
    SDK_SOURCE,
    TRITON_REGISTRIES,
    TRITON_RELEASES,
    TRITON_VERSIONS,
    registries_from_sdk,
    triton_image_uri,
    triton_region_problem,
)

BUNDLED = resources.files("ml_platform").joinpath(SDK_REGISTRY_FILE)
#: Regions that have 25.09 and 26.05 but none of the releases up to 24.09 (observed in the SDK
#: file; refused for every release by the project's old single-release table).
NEWER_REGIONS = {
    "ap-east-2",
    "ap-south-2",
    "ap-southeast-4",
    "ap-southeast-5",
    "ap-southeast-6",
    "ap-southeast-7",
    "eu-central-2",
    "eu-south-2",
    "me-central-1",
    "mx-central-1",
}


def test_the_bundled_copy_is_the_recorded_file() -> None:
    assert hashlib.sha256(BUNDLED.read_bytes()).hexdigest() == SDK_SOURCE.sha256


def _wheel(folder: Path) -> Path:
    """The pinned wheel: from ``MLP_SOURCE_WHEELS`` when set, else pip download (skip when
    no package index answers)."""
    given = os.environ.get("MLP_SOURCE_WHEELS")
    if given and (Path(given) / SDK_SOURCE.wheel).is_file():
        return Path(given) / SDK_SOURCE.wheel
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(folder),
        f"{SDK_SOURCE.package}=={SDK_SOURCE.version}",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.skip("no package index answered within 120 s")
    if done.returncode != 0:
        pytest.skip(f"pip download {SDK_SOURCE.package}: {done.stderr.strip()[-300:]}")
    return folder / SDK_SOURCE.wheel


def test_the_bundled_copy_equals_the_file_in_the_pinned_wheel(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == SDK_SOURCE.wheel_sha256
    with zipfile.ZipFile(wheel) as archive:
        shipped = archive.read(SDK_SOURCE.member)
    assert shipped == BUNDLED.read_bytes()


def test_the_table_is_the_sdks_per_release() -> None:
    data = json.loads(BUNDLED.read_text("utf-8"))
    assert TRITON_REGISTRIES == registries_from_sdk(data)
    assert set(TRITON_VERSIONS) == set(data["versions"])
    assert TRITON_VERSIONS == (
        "23.12",
        "24.01",
        "24.03",
        "24.05",
        "24.09",
        "25.04",
        "25.09",
        "26.05",
    )
    # Every published release has its facts recorded (ml_platform/triton/releases.py).
    assert list(TRITON_RELEASES) == list(TRITON_VERSIONS)
    # Every region the SDK names is one botocore knows.
    assert {r for table in TRITON_REGISTRIES.values() for r in table} <= set(REGIONS)


def test_releases_differ_in_regions_and_accounts() -> None:
    counts = {v: len(TRITON_REGISTRIES[v]) for v in TRITON_VERSIONS}
    assert counts == {
        "23.12": 26,
        "24.01": 26,
        "24.03": 26,
        "24.05": 26,
        "24.09": 26,
        "25.04": 35,
        "25.09": 34,
        "26.05": 34,
    }
    china = {"cn-north-1", "cn-northwest-1"}
    for version in ("25.09", "26.05"):
        assert not china & set(TRITON_REGISTRIES[version])
        assert NEWER_REGIONS <= set(TRITON_REGISTRIES[version])
        assert triton_region_problem("cn-north-1", version) is not None
    assert china <= set(TRITON_REGISTRIES["25.04"])
    assert not NEWER_REGIONS & set(TRITON_REGISTRIES["24.09"])
    assert TRITON_REGISTRIES["25.09"]["ap-east-2"] == "975050140332"
    assert TRITON_REGISTRIES["25.09"]["mx-central-1"] == "637423239942"


def test_image_uris_follow_the_release_and_partition() -> None:
    assert triton_image_uri("ap-southeast-6") == (
        "633930458069.dkr.ecr.ap-southeast-6.amazonaws.com/sagemaker-tritonserver:"
        f"{DEFAULT_TRITON_VERSION}-py3"
    )
    assert triton_image_uri("cn-north-1", "24.09") == (
        "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/sagemaker-tritonserver:24.09-py3"
    )
    with pytest.raises(ValueError, match=r"no Triton 26\.05 image in 'cn-northwest-1'"):
        triton_image_uri("cn-northwest-1", "26.05")
