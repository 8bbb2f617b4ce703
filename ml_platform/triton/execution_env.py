"""Checks of a conda-packed execution environment (``EXECUTION_ENV_PATH``) against the
Triton release that will run it (:mod:`ml_platform.triton.releases`).

A conda-pack archive is a gzip-compressed tar with the environment at its root: ``conda-meta/``
(one JSON record per conda package, named ``<name>-<version>-<build>.json``), ``bin/`` and
``lib/python3.X/site-packages/`` (pip packages as ``<name>-<version>.dist-info``).
conda-pack's documentation:
https://conda.github.io/conda-pack/ ; the Python backend unpacks it at model load
(python_backend README, "Creating Custom Execution Environments").
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

from ml_platform.triton.archive_safety import open_archive
from ml_platform.triton.releases import NUMPY2_FIRST_RELEASE, stub_accepts_numpy2, stub_python

_PYTHON_DIR = re.compile(r"lib/python(3\.\d+)/")
_CONDA_PYTHON = re.compile(r"conda-meta/python-(3\.\d+)\.[^-/]*-[^/]*\.json")
_NUMPY = (
    re.compile(r"conda-meta/numpy-(\d+)\.[^/]*\.json"),
    re.compile(r"lib/python3\.\d+/site-packages/numpy-(\d+)\.[^/]*\.dist-info/"),
)


def _names(path: Path) -> list[str]:
    with open_archive(path, "r:gz") as tar:
        return [m.name.removeprefix("./") + ("/" if m.isdir() else "") for m in tar]


def execution_env_problems(
    path: str | Path, triton_version: str, flag: str = "--execution-env"
) -> list[str]:
    """Why ``path`` cannot be the execution environment of Python models on Triton
    ``triton_version`` (empty: it can). Each problem names the file (as ``flag``), what was
    found and what the release needs."""
    path = Path(path)
    where = f"{flag} {path}"
    if not path.is_file():
        return [f"{where}: not a file"]
    try:
        names = _names(path)
    except (tarfile.TarError, OSError, EOFError) as error:
        return [
            f"{where}: not a gzip-compressed tar archive as conda-pack writes it ({error}); "
            "make one with `conda-pack -n <env> -o processing_env.tar.gz`"
        ]
    if not any(n.startswith("conda-meta/") for n in names):
        return [
            f"{where}: no conda-meta/ folder, so not a conda-pack archive of a conda "
            "environment; make one with `conda-pack -n <env> -o processing_env.tar.gz`"
        ]
    problems = []
    pythons = {m.group(1) for n in names if (m := _CONDA_PYTHON.match(n))} or {
        m.group(1) for n in names if (m := _PYTHON_DIR.match(n))
    }
    wanted = stub_python(triton_version)
    if not pythons:
        problems.append(
            f"{where}: the environment has no Python (no conda-meta/python-*.json, "
            f"no lib/python3.X/); Triton {triton_version}'s stub needs Python {wanted}"
        )
    elif wanted is not None and pythons != {wanted}:
        problems.append(
            f"{where}: has Python {', '.join(sorted(pythons))}; Triton {triton_version}'s "
            f"Python backend stub is Python {wanted}, and loads only an environment of that "
            f"version (conda create -n <env> python={wanted})"
        )
    majors = {int(m.group(1)) for n in names for p in _NUMPY if (m := p.match(n))}
    if not stub_accepts_numpy2(triton_version) and any(v >= 2 for v in majors):
        problems.append(
            f"{where}: has numpy 2; the Python backend stub of Triton {triton_version} (before "
            f"{NUMPY2_FIRST_RELEASE}) is built with pybind11 2.10, and numpy 2 crashes it on the "
            "first request (python_backend PR 384): install 'numpy<2' in the environment"
        )
    return problems
