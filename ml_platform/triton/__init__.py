"""Triton model repositories for SageMaker multi-model endpoints (and Triton on EKS).

Describe models and ensembles with typed specs, check the ensemble wiring, render each
``config.pbtxt`` through Triton's ``ModelConfig`` protobuf, and write a model repository
or a reproducible ``.tar.gz`` per ensemble::

    from ml_platform.triton import package, text_ensemble

    spec = text_ensemble(tokenizer_dir=tok, encoder_path="model.plan", gpu_target="t4")
    package(spec, "build/")  # build/model_trt_python_t4.tar.gz

Importing this package loads no ML framework (only protobuf and tritonclient's config
messages); :mod:`ml_platform.triton.export_onnx` imports torch when it runs.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below, for type checkers and IDEs
    from ml_platform.triton.checker import (
        EnsembleValidationError,
        check_ensemble,
        find_ensemble_problems,
    )
    from ml_platform.triton.ensembles import (
        IMAGE_ARCHIVE,
        TEXT_ARCHIVE,
        EncoderFormat,
        dali_pipeline_source,
        image_ensemble,
        read_classifier,
        text_ensemble,
    )
    from ml_platform.triton.kinds import ARCHIVE_MODELS, KINDS, EnsembleKind
    from ml_platform.triton.pbtxt import parse_pbtxt, read_pbtxt, to_model_config, to_pbtxt
    from ml_platform.triton.repository import (
        package,
        repository_entries,
        write_repository,
    )
    from ml_platform.triton.spec import (
        LATEST_VERSION,
        DataType,
        EnsembleSpec,
        EnsembleStep,
        InstanceKind,
        ModelFile,
        ModelSpec,
        TensorFormat,
        TensorSpec,
    )
    from ml_platform.triton.target_model import validate_target_model

# Exports load on first use (PEP 562), so importing one light module of this package
# (e.g. target_model, used by settings validation) does not load protobuf and tritonclient.
_EXPORTS = {
    "ARCHIVE_MODELS": "ml_platform.triton.kinds",
    "DataType": "ml_platform.triton.spec",
    "EncoderFormat": "ml_platform.triton.ensembles",
    "EnsembleKind": "ml_platform.triton.kinds",
    "EnsembleSpec": "ml_platform.triton.spec",
    "EnsembleStep": "ml_platform.triton.spec",
    "EnsembleValidationError": "ml_platform.triton.checker",
    "IMAGE_ARCHIVE": "ml_platform.triton.ensembles",
    "InstanceKind": "ml_platform.triton.spec",
    "KINDS": "ml_platform.triton.kinds",
    "LATEST_VERSION": "ml_platform.triton.spec",
    "ModelFile": "ml_platform.triton.spec",
    "ModelSpec": "ml_platform.triton.spec",
    "TEXT_ARCHIVE": "ml_platform.triton.ensembles",
    "TensorFormat": "ml_platform.triton.spec",
    "TensorSpec": "ml_platform.triton.spec",
    "check_ensemble": "ml_platform.triton.checker",
    "find_ensemble_problems": "ml_platform.triton.checker",
    "image_ensemble": "ml_platform.triton.ensembles",
    "package": "ml_platform.triton.repository",
    "parse_pbtxt": "ml_platform.triton.pbtxt",
    "read_pbtxt": "ml_platform.triton.pbtxt",
    "repository_entries": "ml_platform.triton.repository",
    "dali_pipeline_source": "ml_platform.triton.ensembles",
    "read_classifier": "ml_platform.triton.ensembles",
    "text_ensemble": "ml_platform.triton.ensembles",
    "to_model_config": "ml_platform.triton.pbtxt",
    "to_pbtxt": "ml_platform.triton.pbtxt",
    "validate_target_model": "ml_platform.triton.target_model",
    "write_repository": "ml_platform.triton.repository",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ARCHIVE_MODELS",
    "IMAGE_ARCHIVE",
    "KINDS",
    "LATEST_VERSION",
    "TEXT_ARCHIVE",
    "DataType",
    "EncoderFormat",
    "EnsembleKind",
    "EnsembleSpec",
    "EnsembleStep",
    "EnsembleValidationError",
    "InstanceKind",
    "ModelFile",
    "ModelSpec",
    "TensorFormat",
    "TensorSpec",
    "check_ensemble",
    "dali_pipeline_source",
    "find_ensemble_problems",
    "image_ensemble",
    "package",
    "parse_pbtxt",
    "read_classifier",
    "read_pbtxt",
    "repository_entries",
    "text_ensemble",
    "to_model_config",
    "to_pbtxt",
    "validate_target_model",
    "write_repository",
]
