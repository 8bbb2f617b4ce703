"""Stand-ins for the local server: an unpacked archive made loadable by a CPU-only Triton.

The local server (:mod:`ml_platform_cli.local_server`) bundles the Python backend only.
Each model of an archive is classified by its config's backend/platform:

* ``python`` and the ensemble itself run for real;
* ``onnxruntime``: replaced by a Python-backend stand-in with the same name, inputs, outputs
  and batch size that runs the archive's own ONNX file with ONNX Runtime on CPU;
* ``tensorrt_plan``: the same, with the ONNX the plan was built from if the caller has it
  (a plan runs only on its GPU); otherwise *not exercised*;
* ``dali``: a Python-defined DALI model (``1/dali.py``, as the image ensemble ships it) is
  replaced by a Python-backend stand-in with the same interface that imports the archive's
  own ``dali.py`` and runs its ``preprocess`` graph with DALI's CPU operators (the decoder on
  the CPU instead of ``mixed``), if the server environment has DALI; a serialized
  ``model.dali`` (its decoder fixed on the GPU) or no DALI there: *not exercised*;
* anything else (``tensorflow_graphdef``, ...): *not exercised*.

A step that is not exercised is reported as such, never passed: its folder and the ensemble
(which cannot run without it) are taken out, and the other models load on their own.
Stand-ins only ever touch the unpacked copy, never the archive.
"""

from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from ml_platform.triton.archive_safety import extract_archive
from ml_platform.triton.pbtxt import read_pbtxt, to_pbtxt

if TYPE_CHECKING:
    from tritonclient.grpc import model_config_pb2 as mc

STANDIN_ASSETS = Path(__file__).resolve().parent / "assets" / "standins"
ARTIFACT_PARAMETER = "STANDIN_ARTIFACT"


class Mode(StrEnum):
    REAL = "real"
    STANDIN = "stand-in"
    NOT_EXERCISED = "not exercised"


@dataclass(frozen=True)
class Step:
    """How one model of the archive runs on the local server."""

    model: str
    kind: str  # the config's backend or platform
    mode: Mode
    detail: str

    def line(self) -> str:
        return f"{self.model:<24} {self.kind:<22} {self.mode.value:<14} {self.detail}"


@dataclass(frozen=True)
class Prepared:
    """An unpacked archive ready to load: ``root`` is the URL for ``POST /models``."""

    archive: str
    root: Path
    ensemble: str | None  # None: no ensemble in the archive, or it cannot run here
    steps: tuple[Step, ...]

    @property
    def loadable(self) -> bool:
        return any(s.mode is not Mode.NOT_EXERCISED for s in self.steps)

    @property
    def complete(self) -> bool:
        """Every step runs (for real or as a stand-in), so the ensemble can be invoked."""
        return self.ensemble is not None and all(
            s.mode is not Mode.NOT_EXERCISED for s in self.steps
        )

    def report(self) -> str:
        return "\n".join([f"{self.archive}:", *(f"  {s.line()}" for s in self.steps)])


#: The stand-ins' runtimes (``server_has`` keys) and the module that provides each.
RUNTIME_MODULES = {"onnxruntime": "onnxruntime", "dali": "nvidia.dali"}


def runtime_available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


def _version_dir(folder: Path) -> Path | None:
    versions = sorted(
        (p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)
    )
    return versions[-1] if versions else None


def _python_config(config: mc.ModelConfig, artifact: Path) -> mc.ModelConfig:
    """The model's config served by the Python backend on CPU, names and shapes unchanged."""
    from tritonclient.grpc import model_config_pb2 as mc

    standin = mc.ModelConfig()
    standin.CopyFrom(config)
    standin.backend = "python"
    standin.platform = ""
    standin.default_model_filename = ""
    del standin.instance_group[:]
    standin.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=1)
    standin.parameters[ARTIFACT_PARAMETER].string_value = str(artifact)
    return standin


def _versioned_dir(folder: Path) -> Path:
    """The newest version folder of a model that needs one (every model of a checked archive)."""
    version = _version_dir(folder)
    if version is None:
        raise ValueError(f"{folder}: no version folder (1/, 2/, ...)")
    return version


def _install(folder: Path, config: mc.ModelConfig, asset: str, artifact: Path) -> None:
    version = _versioned_dir(folder)
    (version / "model.py").write_bytes((STANDIN_ASSETS / asset).read_bytes())
    (folder / "config.pbtxt").write_text(to_pbtxt(_python_config(config, artifact)), "utf-8")


def _onnx(
    folder: Path,
    config: mc.ModelConfig,
    kind: str,
    plan_onnx: Path | None,
    server_has: dict[str, bool],
) -> Step:
    if not server_has.get("onnxruntime", False):
        return Step(
            config.name,
            kind,
            Mode.NOT_EXERCISED,
            "onnxruntime is not installed in the server environment",
        )
    if kind == "tensorrt_plan":
        if plan_onnx is None:
            return Step(
                config.name,
                kind,
                Mode.NOT_EXERCISED,
                "a TensorRT plan runs only on its GPU; no ONNX it was built from given",
            )
        # A copy inside the unpacked folder: the confined local server sees nothing else.
        artifact = folder / "standin-plan.onnx"
        shutil.copyfile(plan_onnx, artifact)
        what = f"ONNX the plan was built from ({plan_onnx.name})"
    else:
        version = _versioned_dir(folder)
        artifact = version / (config.default_model_filename or "model.onnx")
        what = f"the archive's {artifact.relative_to(folder.parent)}"
        if not artifact.is_file():
            return Step(config.name, kind, Mode.NOT_EXERCISED, f"no {what}")
    _install(folder, config, "onnx_model.py", artifact)
    return Step(config.name, kind, Mode.STANDIN, f"ONNX Runtime CPU running {what}")


def _dali(folder: Path, config: mc.ModelConfig, server_has: dict[str, bool]) -> Step:
    if not server_has.get("dali", False):
        return Step(
            config.name,
            "dali",
            Mode.NOT_EXERCISED,
            "DALI is not installed in the server environment",
        )
    version = _version_dir(folder)
    # The DALI backend prefers a serialized model.dali over dali.py (dali_backend README,
    # "Autoserialization"); a serialized pipeline fixes its decoder on the GPU ("mixed") and
    # DALI has no API to move a deserialized pipeline's operators to the CPU. Reported, not
    # faked. https://github.com/triton-inference-server/dali_backend/blob/r25.09/README.md
    if version is None or (version / "model.dali").exists():
        return Step(
            config.name,
            "dali",
            Mode.NOT_EXERCISED,
            "a serialized model.dali decodes on the GPU; no CPU stand-in for it",
        )
    pipeline = version / "dali.py"
    if not pipeline.is_file():
        return Step(config.name, "dali", Mode.NOT_EXERCISED, "no dali.py in the archive")
    _install(folder, config, "dali_model.py", pipeline.resolve())
    return Step(
        config.name,
        "dali",
        Mode.STANDIN,
        f"DALI CPU operators running the archive's {pipeline.relative_to(folder.parent)}",
    )


def prepare(
    archive: str | Path,
    dest: str | Path,
    *,
    plan_onnx: str | Path | None = None,
    server_has: dict[str, bool] | None = None,
) -> Prepared:
    """Unpack ``archive`` into the fresh folder ``dest`` (the project's safe extractor, as
    SageMaker unpacks an archive) and put stand-ins in place.

    Args:
        plan_onnx: The ONNX a ``tensorrt_plan`` model was built from, to stand in for it.
        server_has: Which runtimes the server environment has (``onnxruntime``, ``dali``:
            :data:`RUNTIME_MODULES`); default: what this Python can import.
    """
    archive, dest = Path(archive), Path(dest)
    dest.mkdir(parents=True, exist_ok=False)
    extract_archive(archive, dest)
    if server_has is None:
        server_has = {name: runtime_available(m) for name, m in RUNTIME_MODULES.items()}
    plan = Path(plan_onnx) if plan_onnx is not None else None
    steps, ensemble, removed = [], None, []
    for folder in sorted(p for p in dest.iterdir() if (p / "config.pbtxt").is_file()):
        config = read_pbtxt(folder)
        kind = config.platform or config.backend
        if kind == "ensemble":
            ensemble = config.name
            continue
        if kind == "python":
            step = Step(config.name, kind, Mode.REAL, "Python backend")
        elif kind in ("onnxruntime", "onnxruntime_onnx", "tensorrt_plan", "tensorrt"):
            step = _onnx(
                folder, config, "tensorrt_plan" if "tensorrt" in kind else kind, plan, server_has
            )
        elif kind == "dali":
            step = _dali(folder, config, server_has)
        else:
            step = Step(
                config.name,
                kind,
                Mode.NOT_EXERCISED,
                f"no CPU runtime for {kind} in the local server",
            )
        if step.mode is Mode.NOT_EXERCISED:
            removed.append(folder)
        steps.append(step)
    if ensemble is not None:
        missing = [s.model for s in steps if s.mode is Mode.NOT_EXERCISED]
        if missing:
            steps.insert(
                0, Step(ensemble, "ensemble", Mode.NOT_EXERCISED, f"needs {', '.join(missing)}")
            )
            removed.append(dest / ensemble)
            ensemble = None
        else:
            steps.insert(0, Step(ensemble, "ensemble", Mode.REAL, "Triton's ensemble scheduler"))
    for folder in removed:
        shutil.rmtree(folder)
    return Prepared(archive.name, dest, ensemble, tuple(steps))
