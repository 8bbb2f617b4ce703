"""What each Triton release needs and ships: the one place for per-release facts.

Every fact an archive or an endpoint depends on, per release, with its source beside it. Where
the project publishes its image (region and account) is the SageMaker Python SDK's data, read
in :mod:`ml_platform.sagemaker_images`; everything else is here.

Release strings are ``YY.MM`` (NGC / SageMaker tags without ``-py3``). Kept free of heavy
imports: settings validation uses it.

Sources, per fact:

* **Stub Python** (what a conda-packed ``EXECUTION_ENV_PATH`` must match): the Python of the
  container's Ubuntu. Ubuntu 22.04 with Python 3.10 from 23.05 to 24.10; Ubuntu 24.04 with
  Python 3.12 from 24.11 on: the 24.12 release notes list "Ubuntu 24.04 including Python 3.12"
  (https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-24-12.html),
  and the server's ``build.py`` builds on the ubuntu2404 repositories from branch r24.11
  (https://github.com/triton-inference-server/server/blob/r24.11/build.py). The python_backend
  README said 3.10 until r25.12; that line was stale.
* **numpy 2**: the stub of releases before 24.11 is built with pybind11 2.10, which misreads
  numpy 2 arrays (the first BYTES request crashes the stub with "unpack_from requires a buffer
  of at least ... bytes", later ones answer "Stub process ... is not healthy");
  https://github.com/triton-inference-server/python_backend/pull/384 fixed it in 24.11.
* **CUDA and GPUs**: the release notes' "Driver Requirements" and "GPU Requirements",
  https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-<yy-mm>.html
  (24.09: CUDA 12.6, compute capability 6.0+; 25.03 and later: 7.5+ only; 25.06: CUDA 12.9.1;
  25.08: CUDA 13.0.0 and 25.10: CUDA 13.0.2.006, "NVIDIA Driver release 575 or later", so 25.09
  is CUDA 13.0; 26.06 is built on CUDA 13.3.0, so 26.05 is CUDA 13 too).
* **DALI**: the ``DALI_VERSION`` file of dali_backend's ``r<release>`` branch,
  https://github.com/triton-inference-server/dali_backend/blob/r25.09/DALI_VERSION (and r23.12
  ... r26.05 alike).
* **TensorRT** (a plan loads only under the TensorRT version that built it): NVIDIA's
  Frameworks Support Matrix, row "TensorRT" of each container release,
  https://docs.nvidia.com/deeplearning/frameworks/support-matrix/index.html. The matrix is a
  web page, not machine-readable data; 26.05's row was not found in the sources consulted
  (2026-12-02), so it is ``None`` here and plans for it are recorded but not checked.
* **Security**: NVIDIA's August 2025 bulletin (a_id 5687): CVE-2025-23319/23320/23334, fixed in
  25.07. The May 2026 bulletin (a_id 5828, 2026-05-20: CVE-2026-24206/24207 authentication
  bypass, 24208/24209 path traversal) postdates 25.09; its fixed release is known here only
  from a downstream project that moved to 26.04 for it (fastmachinelearning/SuperSONIC#83),
  not from NVIDIA's page; see docs/serving-sagemaker.md "The Triton release".
* **TensorFlow backend**: shipped last in 25.02 (release notes of 25.03,
  https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-25-03.html).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DEFAULT_TRITON_VERSION",
    "NUMPY2_FIRST_RELEASE",
    "PATCHED_TRITON_RELEASE",
    "STUB_PYTHON",
    "TENSORFLOW_LAST_RELEASE",
    "TRITON_CVES",
    "TRITON_RELEASES",
    "TritonRelease",
    "backends_problem",
    "has_tensorflow_backend",
    "numpy_pin",
    "release_key",
    "stub_accepts_numpy2",
    "stub_python",
    "tensorrt_of",
    "tensorrt_problem",
    "triton_image",
]

#: (first release, stub Python) in release order: each applies until the next one starts.
STUB_PYTHON: tuple[tuple[str, str], ...] = (("23.05", "3.10"), ("24.11", "3.12"))
#: The first release whose stub handles numpy 2 (python_backend PR 384).
NUMPY2_FIRST_RELEASE = "24.11"
#: The TensorFlow backend shipped last in this release.
TENSORFLOW_LAST_RELEASE = "25.02"
#: NVIDIA's August 2025 security bulletin: a chain through the Python backend and shared
#: memory to unauthenticated remote code execution in every Triton before 25.07,
#: https://nvidia.custhelp.com/app/answers/detail/a_id/5687
TRITON_CVES = ("CVE-2025-23319", "CVE-2025-23320", "CVE-2025-23334")
PATCHED_TRITON_RELEASE = "25.07"


def triton_image(version: str) -> str:
    """NGC's Triton image of ``version``: the same release as SageMaker's container, so the same
    backends (Triton on EKS runs it; ``mlp images`` lists it)."""
    return f"nvcr.io/nvidia/tritonserver:{version}-py3"


def release_key(release: str) -> tuple[int, int]:
    """``"24.09"`` -> ``(24, 9)``, for ordering releases.

    Raises:
        ValueError: Not a ``YY.MM`` release.
    """
    year, _, month = release.partition(".")
    if not (year.isdigit() and month.isdigit() and 1 <= int(month) <= 12):
        raise ValueError(f"Triton release {release!r}: expected YY.MM, e.g. 24.09")
    return int(year), int(month)


def stub_python(release: str) -> str | None:
    """The Python of ``release``'s Python-backend stub (``None``: before 23.05, not tracked)."""
    found = None
    for first, python in STUB_PYTHON:
        if release_key(release) >= release_key(first):
            found = python
    return found


def stub_accepts_numpy2(release: str) -> bool:
    """Whether ``release``'s Python-backend stub works with numpy 2."""
    return release_key(release) >= release_key(NUMPY2_FIRST_RELEASE)


def numpy_pin(release: str) -> str:
    """The numpy requirement for an execution environment of ``release``."""
    return "numpy" if stub_accepts_numpy2(release) else "numpy<2"


def has_tensorflow_backend(release: str) -> bool:
    """Whether ``release`` ships the TensorFlow backend (up to 25.02)."""
    return release_key(release) <= release_key(TENSORFLOW_LAST_RELEASE)


@dataclass(frozen=True)
class TritonRelease:
    """What a Triton release needs and ships (sources in the module docstring).

    Attributes:
        cuda_major: Major version of the CUDA the container is built on.
        min_compute_capability: Oldest GPU architecture it supports (7.5 = Turing: T4).
        dali: DALI version of its DALI backend, which serializes the image ensemble's
            ``dali.py``.
        tensorrt: TensorRT version of the container (``major.minor.patch``), the only one
            whose plans it loads; ``None`` when no consulted source states it.
    """

    cuda_major: int
    min_compute_capability: float
    dali: str
    tensorrt: str | None

    def __post_init__(self) -> None:
        if self.cuda_major < 12:
            raise ValueError(f"cuda_major={self.cuda_major}: releases here are CUDA 12 or later")


#: Every release SageMaker publishes (``sagemaker_images.TRITON_VERSIONS``; a test holds the
#: two equal). The stub Python and numpy rules above also cover other releases (the local test
#: server's 24.10).
TRITON_RELEASES: dict[str, TritonRelease] = {
    "23.12": TritonRelease(12, 6.0, "1.31", "8.6.1"),
    "24.01": TritonRelease(12, 6.0, "1.31", "8.6.1"),
    "24.03": TritonRelease(12, 6.0, "1.31", "8.6.3"),
    "24.05": TritonRelease(12, 6.0, "1.36", "10.0.1"),
    "24.09": TritonRelease(12, 6.0, "1.39.0", "10.4.0"),
    "25.04": TritonRelease(12, 7.5, "1.47.0", "10.9.0"),
    "25.09": TritonRelease(13, 7.5, "1.51.2", "10.13.3"),
    "26.05": TritonRelease(13, 7.5, "2.1.0", None),
}


# The default: the newest release whose facts are all known here (26.05's TensorRT is not;
# docs/serving-sagemaker.md "The Triton release" gives the comparison with 26.05). It is
# patched against the August 2025 bulletin, runs the image ensemble's dali.py with DALI
# 1.51.2, and its stub is Python 3.12 (Ubuntu 24.04) like every release from 24.11. Its CUDA 13
# needs driver 575+ natively: sagemaker_images.DEFAULT_INFERENCE_AMI_VERSION has 580. Here with
# the release facts, not in sagemaker_images, because the archive builders check against it when
# no release is named (and sagemaker_images reads this module).
DEFAULT_TRITON_VERSION = "25.09"


def tensorrt_of(release: str) -> str | None:
    """The TensorRT version of ``release`` (``None``: unknown release or not stated)."""
    row = TRITON_RELEASES.get(release)
    return row.tensorrt if row else None


def tensorrt_problem(where: str, built_with: str, release: str) -> str | None:
    """Why a TensorRT plan built with TensorRT ``built_with`` cannot load on Triton
    ``release`` (``None`` if it can, or the release's TensorRT is not recorded). Versions
    compare on ``major.minor.patch``."""
    wanted = tensorrt_of(release)
    if wanted is None:
        return None
    if _three(built_with) == _three(wanted):
        return None
    return (
        f"{where}: its TensorRT plan was built with TensorRT {built_with}, but Triton {release} "
        f"runs TensorRT {wanted}, which refuses plans of another version: rebuild the plan with "
        f"TensorRT {wanted} (trtexec inside nvcr.io/nvidia/tritonserver:{release}-py3) and "
        "package it again"
    )


def _three(version: str) -> tuple[str, ...]:
    return tuple(version.split(".")[:3])


def backends_problem(where: str, backends: list[str], release: str) -> str | None:
    """Why Triton ``release`` has no backend for an archive using ``backends`` (``None``
    when it has them all). Only the TensorFlow backend left a release here."""
    if any(b.startswith("tensorflow") for b in backends) and not has_tensorflow_backend(release):
        return (
            f"{where}: it needs the TensorFlow backend, which Triton shipped last in "
            f"{TENSORFLOW_LAST_RELEASE}; Triton {release} cannot load it: convert the model "
            "to ONNX and package the archive again"
        )
    return None
