"""What an archive was built for, and which Triton releases can load it.

``mlp models package`` writes a small record into the ensemble's folder,
``<ensemble>/mlp-archive.json`` (a folder file, as the archive rules require; Triton reads only
``config.pbtxt`` and version folders)::

    {"backends": ["dali", "onnxruntime"], "format": 1, "triton_release": "25.09"}

plus ``"tensorrt"`` (the TensorRT that built a plan) and ``"stub_python"`` (the Python of a
shipped execution environment) when they apply. The facts that decide loading are read from
the archive's own configs wherever they are (backends, the plan's ``tensorrt_version``
parameter), so an archive built elsewhere is judged too; the record adds the release it was
built for and the execution environment's Python. :func:`release_problems` says why a release
cannot load it, from the per-release facts of :mod:`ml_platform.triton.releases`.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ml_platform.triton._archive_read import MAX_CONFIG_BYTES, read_member, root_configs
from ml_platform.triton.releases import (
    backends_problem,
    release_key,
    stub_python,
    tensorrt_problem,
)

if TYPE_CHECKING:
    from ml_platform.triton.spec import EnsembleSpec

__all__ = [
    "EXECUTION_ENV_KEY",
    "METADATA_FILE",
    "METADATA_FORMAT",
    "S3_METADATA",
    "TENSORRT_PARAMETER",
    "ArchiveFacts",
    "metadata_bytes",
    "read_archive_facts",
    "release_problems",
    "spec_facts",
]

#: The record's file name inside the ensemble folder.
METADATA_FILE = "mlp-archive.json"
METADATA_FORMAT = 1
#: The TensorRT model's config parameter that records the TensorRT version of its plan.
TENSORRT_PARAMETER = "tensorrt_version"
#: Python-backend parameter that names a shipped execution environment.
EXECUTION_ENV_KEY = "EXECUTION_ENV_PATH"
#: S3 user metadata that ``mlp models upload`` sets from the record, so ``mlp models list``
#: reads it with one HEAD request per archive.
S3_METADATA = {
    "triton_release": "mlp-triton-release",
    "backends": "mlp-backends",
    "tensorrt": "mlp-tensorrt",
    "stub_python": "mlp-stub-python",
}


@dataclass(frozen=True)
class ArchiveFacts:
    """What an archive needs of the release that serves it.

    Attributes:
        triton_release: The release it was built for (``None``: not recorded).
        backends: Backends and platforms of its models (``dali``, ``tensorrt_plan``, ...).
        tensorrt: TensorRT version its plan was built with (``None``: no plan, or not
            recorded; see ``plan_without_version``).
        stub_python: Python of its shipped execution environment (``None``: none shipped, or
            not recorded).
        plan_without_version: It holds a TensorRT plan whose version is not recorded.
    """

    triton_release: str | None = None
    backends: tuple[str, ...] = ()
    tensorrt: str | None = None
    stub_python: str | None = None
    plan_without_version: bool = False

    def record(self) -> dict[str, Any]:
        """The JSON record written into the archive."""
        out: dict[str, Any] = {"format": METADATA_FORMAT, "backends": list(self.backends)}
        if self.triton_release:
            out["triton_release"] = self.triton_release
        if self.tensorrt:
            out["tensorrt"] = self.tensorrt
        if self.stub_python:
            out["stub_python"] = self.stub_python
        return out

    def s3_metadata(self) -> dict[str, str]:
        """The record as S3 user metadata (``mlp models upload``)."""
        values = {
            "triton_release": self.triton_release or "",
            "backends": ",".join(self.backends),
            "tensorrt": self.tensorrt or "",
            "stub_python": self.stub_python or "",
        }
        return {S3_METADATA[k]: v for k, v in values.items() if v}

    @classmethod
    def from_s3_metadata(cls, metadata: Mapping[str, str]) -> ArchiveFacts | None:
        """The facts ``mlp models upload`` stored (``None`` when it stored none)."""
        values = {k: metadata.get(v, "") for k, v in S3_METADATA.items()}
        if not any(values.values()):
            return None
        return cls(
            triton_release=values["triton_release"] or None,
            backends=tuple(b for b in values["backends"].split(",") if b),
            tensorrt=values["tensorrt"] or None,
            stub_python=values["stub_python"] or None,
        )


def spec_facts(spec: EnsembleSpec) -> ArchiveFacts:
    """The facts of an ensemble about to be packaged."""
    backends = sorted({m.platform or m.backend or "" for m in spec.models} - {""})
    tensorrt = next(
        (
            m.parameters[TENSORRT_PARAMETER]
            for m in spec.models
            if TENSORRT_PARAMETER in m.parameters
        ),
        None,
    )
    ships_env = any(EXECUTION_ENV_KEY in m.parameters for m in spec.models)
    python = stub_python(spec.triton_release) if ships_env and spec.triton_release else None
    return ArchiveFacts(
        triton_release=spec.triton_release,
        backends=tuple(backends),
        tensorrt=tensorrt,
        stub_python=python,
    )


def metadata_bytes(spec: EnsembleSpec) -> bytes:
    """The record for ``spec``, as written (sorted keys: equal specs, equal bytes)."""
    return (json.dumps(spec_facts(spec).record(), indent=2, sort_keys=True) + "\n").encode()


def read_archive_facts(path: str | Path) -> ArchiveFacts:
    """The facts of the archive at ``path``: backends and the plan's TensorRT version from its
    configs, the release and execution environment's Python from its record, if any.
    Unreadable parts are left out (the archive checks report them)."""
    from ml_platform.triton.archive_safety import open_archive
    from ml_platform.triton.pbtxt import parse_pbtxt

    backends: set[str] = set()
    tensorrt: str | None = None
    plan_without_version = False
    record: dict[str, Any] = {}
    try:
        with open_archive(path, "r:gz") as tar:
            for member in tar:
                parts = member.name.removeprefix("./").split("/")
                if (
                    len(parts) == 2
                    and parts[1] == METADATA_FILE
                    and member.isfile()
                    and member.size <= MAX_CONFIG_BYTES
                ):
                    try:
                        loaded = json.loads(read_member(tar, member))
                    except ValueError:
                        loaded = None
                    record = loaded if isinstance(loaded, dict) else {}
            for _folder, member in root_configs(tar):
                if member.size > MAX_CONFIG_BYTES:
                    continue
                try:
                    config = parse_pbtxt(read_member(tar, member).decode("utf-8"))
                except Exception:  # protobuf's ParseError; archive_problems reports it
                    continue
                kind = config.platform or config.backend
                if kind and kind != "ensemble":
                    backends.add(kind)
                if config.platform == "tensorrt_plan" or config.backend == "tensorrt":
                    parameter = config.parameters.get(TENSORRT_PARAMETER)
                    if parameter and parameter.string_value:
                        tensorrt = parameter.string_value
                    else:
                        plan_without_version = True
    except (tarfile.TarError, OSError, EOFError, UnicodeDecodeError, ValueError):
        return ArchiveFacts()
    release = record.get("triton_release")
    python = record.get("stub_python")
    return ArchiveFacts(
        triton_release=release if isinstance(release, str) else None,
        backends=tuple(sorted(backends)),
        tensorrt=tensorrt,
        stub_python=python if isinstance(python, str) else None,
        plan_without_version=plan_without_version,
    )


def release_problems(where: str, facts: ArchiveFacts, release: str) -> list[str]:
    """Why Triton ``release`` cannot load an archive with ``facts`` (empty: it can, as far as
    the recorded facts tell)."""
    problems = []
    backend = backends_problem(where, list(facts.backends), release)
    if backend:
        problems.append(backend)
    if facts.plan_without_version:
        problems.append(
            f"{where}: its TensorRT plan records no {TENSORRT_PARAMETER!r}: a plan loads only "
            "under the TensorRT version that built it; package it again with mlp models "
            "package --tensorrt-version"
        )
    if facts.tensorrt:
        plan = tensorrt_problem(where, facts.tensorrt, release)
        if plan:
            problems.append(plan)
    wanted = stub_python(release) if _is_release(release) else None
    if facts.stub_python and wanted and facts.stub_python != wanted:
        problems.append(
            f"{where}: its execution environment is Python {facts.stub_python} (built for "
            f"Triton {facts.triton_release or 'another release'}); Triton {release}'s Python "
            f"backend stub is Python {wanted}: rebuild the environment with python={wanted} "
            "and package the archive again"
        )
    return problems


def _is_release(text: str) -> bool:
    try:
        release_key(text)
    except ValueError:
        return False
    return True
