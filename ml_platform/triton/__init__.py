"""Triton model repositories for SageMaker multi-model endpoints (and Triton on EKS).

Describe models and ensembles with typed specs, check the ensemble wiring, render each
``config.pbtxt`` through Triton's ``ModelConfig`` protobuf, and write a model repository
or a reproducible ``.tar.gz`` per ensemble::

    from ml_platform.triton import package, text_ensemble

    spec = text_ensemble(tokenizer_dir=tok, encoder_path="model.plan")
    package(spec, "build/")  # build/model_trt_python.tar.gz

Importing this package loads no ML framework (only protobuf and tritonclient's config
messages); :mod:`ml_platform.triton.export_onnx` imports torch when it runs.
"""

from ml_platform.triton.checker import (
    EnsembleValidationError,
    check_ensemble,
    find_ensemble_problems,
)
from ml_platform.triton.ensembles import (
    ARCHIVE_MODELS,
    IMAGE_ARCHIVE,
    TEXT_ARCHIVE,
    EncoderFormat,
    image_ensemble,
    serialize_dali_pipeline,
    text_ensemble,
)
from ml_platform.triton.pbtxt import parse_pbtxt, read_pbtxt, to_model_config, to_pbtxt
from ml_platform.triton.repository import (
    package,
    repository_entries,
    validate_target_model,
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

__all__ = [
    "ARCHIVE_MODELS",
    "IMAGE_ARCHIVE",
    "LATEST_VERSION",
    "TEXT_ARCHIVE",
    "DataType",
    "EncoderFormat",
    "EnsembleSpec",
    "EnsembleStep",
    "EnsembleValidationError",
    "InstanceKind",
    "ModelFile",
    "ModelSpec",
    "TensorFormat",
    "TensorSpec",
    "check_ensemble",
    "find_ensemble_problems",
    "image_ensemble",
    "package",
    "parse_pbtxt",
    "read_pbtxt",
    "repository_entries",
    "serialize_dali_pipeline",
    "text_ensemble",
    "to_model_config",
    "to_pbtxt",
    "validate_target_model",
    "write_repository",
]
