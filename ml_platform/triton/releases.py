"""Per-release facts of Triton's Python backend that an archive's Python models depend on.

* The stub's Python (what a conda-packed ``EXECUTION_ENV_PATH`` must match): 3.10 in releases
  23.05 to 25.11 (Ubuntu 22.04 images), 3.12 from 25.12 (Ubuntu 24.04). "Creating Custom
  Execution Environments" in
  https://github.com/triton-inference-server/python_backend#creating-custom-execution-environments
  and the Triton release notes' framework matrix:
  https://docs.nvidia.com/deeplearning/frameworks/support-matrix/index.html
* numpy 2: the stub of releases before 24.11 is built with pybind11 2.10, which misreads
  numpy 2 arrays (the first BYTES request crashes the stub with "unpack_from requires a buffer
  of at least ... bytes", later ones answer "Stub process ... is not healthy");
  https://github.com/triton-inference-server/python_backend/pull/384 fixed it in 24.11.

Release strings are ``YY.MM`` (NGC / SageMaker tags without ``-py3``).
"""

from __future__ import annotations

#: (first release, stub Python) in release order: each applies until the next one starts.
STUB_PYTHON: tuple[tuple[str, str], ...] = (("23.05", "3.10"), ("25.12", "3.12"))
#: The first release whose stub handles numpy 2 (python_backend PR 384).
NUMPY2_FIRST_RELEASE = "24.11"


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
