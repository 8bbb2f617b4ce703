"""``config.pbtxt`` through Triton's own ``ModelConfig`` protobuf.

The text is always produced by ``google.protobuf.text_format`` from a
``tritonclient.grpc.model_config_pb2.ModelConfig`` message, so a field name or enum
value that Triton does not know fails here instead of at model load time.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from ml_platform.triton.spec import (
    EnsembleSpec,
    EnsembleStep,
    InstanceKind,
    ModelSpec,
    TensorFormat,
    TensorSpec,
)

#: ``platform`` value of an ensemble model.
ENSEMBLE_PLATFORM = "ensemble"


def _data_type(tensor: TensorSpec) -> int:
    """Protobuf enum number of the tensor's data type."""
    number: int = mc.DataType.Value(f"TYPE_{tensor.dtype.value}")
    return number


def _fill_input(message: mc.ModelInput, tensor: TensorSpec) -> None:
    message.name = tensor.name
    message.data_type = _data_type(tensor)
    message.dims.extend(tensor.dims)
    if tensor.format is not TensorFormat.NONE:
        message.format = mc.ModelInput.Format.Value(f"FORMAT_{tensor.format.value}")
    if tensor.optional:
        message.optional = True
    if tensor.allow_ragged_batch:
        message.allow_ragged_batch = True


def _fill_output(message: mc.ModelOutput, tensor: TensorSpec) -> None:
    message.name = tensor.name
    message.data_type = _data_type(tensor)
    message.dims.extend(tensor.dims)
    if tensor.label_filename is not None:
        message.label_filename = tensor.label_filename


def _model_config(spec: ModelSpec) -> mc.ModelConfig:
    config = mc.ModelConfig(name=spec.name, max_batch_size=spec.max_batch_size)
    if spec.backend is not None:
        config.backend = spec.backend
    if spec.platform is not None:
        config.platform = spec.platform
    for tensor in spec.inputs:
        _fill_input(config.input.add(), tensor)
    for tensor in spec.outputs:
        _fill_output(config.output.add(), tensor)
    if spec.instance_kind is not InstanceKind.AUTO:
        group = config.instance_group.add()
        group.kind = mc.ModelInstanceGroup.Kind.Value(f"KIND_{spec.instance_kind.value}")
        group.count = spec.instance_count
    for key, value in spec.parameters.items():
        config.parameters[key].string_value = value
    if spec.dynamic_batching:
        config.dynamic_batching.SetInParent()
        if spec.max_queue_delay_microseconds:
            config.dynamic_batching.max_queue_delay_microseconds = spec.max_queue_delay_microseconds
    if spec.default_model_filename is not None:
        config.default_model_filename = spec.default_model_filename
    return config


def _ensemble_config(spec: EnsembleSpec) -> mc.ModelConfig:
    config = mc.ModelConfig(
        name=spec.name, platform=ENSEMBLE_PLATFORM, max_batch_size=spec.max_batch_size
    )
    for tensor in spec.inputs:
        _fill_input(config.input.add(), tensor)
    for tensor in spec.outputs:
        _fill_output(config.output.add(), tensor)
    for step in spec.steps:
        message = config.ensemble_scheduling.step.add()
        message.model_name = step.model_name
        message.model_version = step.model_version
        message.input_map.update(step.input_map)
        message.output_map.update(step.output_map)
    return config


def to_model_config(spec: ModelSpec | EnsembleSpec) -> mc.ModelConfig:
    """Build the ``ModelConfig`` message of a model or of an ensemble (not its models)."""
    if isinstance(spec, EnsembleSpec):
        return _ensemble_config(spec)
    return _model_config(spec)


def to_pbtxt(spec: ModelSpec | EnsembleSpec | mc.ModelConfig) -> str:
    """Render ``config.pbtxt`` text for a spec or an existing ``ModelConfig``.

    Map entries are written in sorted key order, so equal specs give equal text.
    """
    config = spec if isinstance(spec, mc.ModelConfig) else to_model_config(spec)
    text: str = text_format.MessageToString(config)
    return text


def parse_pbtxt(text: str) -> mc.ModelConfig:
    """Parse ``config.pbtxt`` text back into a ``ModelConfig`` (raises ``ParseError``)."""
    return text_format.Parse(text, mc.ModelConfig())


def read_pbtxt(path: str | Path) -> mc.ModelConfig:
    """Read and parse a ``config.pbtxt`` file (or a model folder holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.pbtxt"
    return parse_pbtxt(path.read_text(encoding="utf-8"))


def _tensor(message: mc.ModelInput | mc.ModelOutput) -> TensorSpec:
    # Wiring only: label files are not carried over (the spec would demand the file itself).
    dtype = mc.DataType.Name(message.data_type).removeprefix("TYPE_")
    ragged = isinstance(message, mc.ModelInput) and message.allow_ragged_batch
    return TensorSpec(
        name=message.name, dtype=dtype, dims=tuple(message.dims), allow_ragged_batch=ragged
    )


def from_model_config(config: mc.ModelConfig) -> ModelSpec:
    """The wiring-relevant part of a (non-ensemble) model's config as a :class:`ModelSpec`:
    name, backend/platform, batch size and tensors (no files)."""
    return ModelSpec(
        name=config.name,
        inputs=tuple(_tensor(t) for t in config.input),
        outputs=tuple(_tensor(t) for t in config.output),
        backend=config.backend or None,
        platform=config.platform or None,
        max_batch_size=config.max_batch_size,
    )


def ensemble_from_configs(ensemble: mc.ModelConfig, models: list[mc.ModelConfig]) -> EnsembleSpec:
    """Rebuild an :class:`EnsembleSpec` from parsed configs (e.g. read out of an archive), so
    the ensemble checker can run over archives built elsewhere."""
    steps = tuple(
        EnsembleStep(
            model_name=s.model_name,
            model_version=s.model_version,
            input_map=dict(s.input_map),
            output_map=dict(s.output_map),
        )
        for s in ensemble.ensemble_scheduling.step
    )
    return EnsembleSpec(
        name=ensemble.name,
        inputs=tuple(_tensor(t) for t in ensemble.input),
        outputs=tuple(_tensor(t) for t in ensemble.output),
        steps=steps,
        models=tuple(from_model_config(m) for m in models),
        max_batch_size=ensemble.max_batch_size,
    )
