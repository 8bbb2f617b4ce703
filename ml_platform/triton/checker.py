"""Static checks of an ensemble's wiring, run before anything is written.

Triton only finds a miswired ensemble when it loads the repository, which on a
SageMaker multi-model endpoint is at the first request for the archive. These checks
catch the same mistakes at build time and report all of them at once.

Shapes are compared as Triton sees them at run time: a batching owner (model or
ensemble with ``max_batch_size > 0``) adds a leading ``-1`` batch dimension, and ``-1``
on either side matches any size.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ml_platform.triton.spec import (
    LATEST_VERSION,
    EnsembleSpec,
    EnsembleStep,
    ModelSpec,
    TensorSpec,
)


class EnsembleValidationError(ValueError):
    """An ensemble is miswired; ``problems`` lists every finding."""

    def __init__(self, ensemble: str, problems: list[str]) -> None:
        self.ensemble = ensemble
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"ensemble {ensemble!r} has {len(self.problems)} problem(s):\n{lines}")


@dataclass(frozen=True)
class _Port:
    """Where an ensemble tensor is produced or consumed, with its run-time shape."""

    where: str  # "ensemble input", "step 'm' output 'x'"...
    step: int | None  # index of the step, None for the ensemble itself
    tensor: TensorSpec
    shape: tuple[int, ...]


def _shape(tensor: TensorSpec, max_batch_size: int) -> tuple[int, ...]:
    return ((-1,) if max_batch_size > 0 else ()) + tensor.dims


def _shapes_match(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b, strict=True))


def _step_label(step: EnsembleStep) -> str:
    return f"step {step.model_name!r}"


def find_ensemble_problems(ensemble: EnsembleSpec) -> list[str]:
    """Every wiring problem of ``ensemble``, each naming the step and tensor involved.

    Checked: model names are unique and differ from the ensemble's; each step's model is
    in ``ensemble.models`` with the requested version; mapped tensor names exist on the
    step's model; every required model input is mapped; every consumed tensor is
    produced exactly once, with the same data type and a compatible shape; every
    ensemble output is produced; steps form no cycle; batch sizes are compatible (a
    batching ensemble cannot run a model with ``max_batch_size`` 0 or a smaller one).
    """
    names = [m.name for m in ensemble.models]
    problems = _name_problems(ensemble, names)
    producers: dict[str, list[_Port]] = defaultdict(list)
    consumers: dict[str, list[_Port]] = defaultdict(list)
    for tensor in ensemble.inputs:
        producers[tensor.name].append(
            _Port("ensemble input", None, tensor, _shape(tensor, ensemble.max_batch_size))
        )
    for tensor in ensemble.outputs:
        consumers[tensor.name].append(
            _Port("ensemble output", None, tensor, _shape(tensor, ensemble.max_batch_size))
        )
    for index, step in enumerate(ensemble.steps):
        problems += _step_problems(ensemble, index, step, names, producers, consumers)
    problems += _producer_problems(producers)
    problems += _consumer_problems(producers, consumers)
    problems.extend(_cycle_problems(ensemble, producers, consumers))
    return problems


def _name_problems(ensemble: EnsembleSpec, names: list[str]) -> list[str]:
    """Model names defined twice, or equal to the ensemble's."""
    problems = [
        f"model {name!r} is defined {names.count(name)} times"
        for name in sorted({n for n in names if names.count(n) > 1})
    ]
    if ensemble.name in names:
        problems.append(f"model {ensemble.name!r} has the same name as the ensemble")
    return problems


def _step_problems(
    ensemble: EnsembleSpec,
    index: int,
    step: EnsembleStep,
    names: list[str],
    producers: dict[str, list[_Port]],
    consumers: dict[str, list[_Port]],
) -> list[str]:
    """What is wrong with one step's model, version and batch size, and its maps; adds the
    tensors it consumes and produces to ``consumers`` and ``producers``."""
    label = _step_label(step)
    model = ensemble.model(step.model_name)
    if model is None:
        return [
            f"{label}: model {step.model_name!r} is not among the ensemble's models {sorted(names)}"
        ]
    problems = _version_and_batch_problems(ensemble, step, model, label)
    for model_input, tensor_name in step.input_map.items():
        spec = model.input(model_input)
        if spec is None:
            problems.append(
                f"{label}: input_map key {model_input!r} is not an input of the model "
                f"(inputs: {[t.name for t in model.inputs]})"
            )
            continue
        consumers[tensor_name].append(
            _Port(f"{label} input {model_input!r}", index, spec, _shape(spec, model.max_batch_size))
        )
    for spec in model.inputs:
        if not spec.optional and spec.name not in step.input_map:
            problems.append(f"{label}: required input {spec.name!r} is not mapped")
    for model_output, tensor_name in step.output_map.items():
        spec = model.output(model_output)
        if spec is None:
            problems.append(
                f"{label}: output_map key {model_output!r} is not an output of the model "
                f"(outputs: {[t.name for t in model.outputs]})"
            )
            continue
        producers[tensor_name].append(
            _Port(
                f"{label} output {model_output!r}", index, spec, _shape(spec, model.max_batch_size)
            )
        )
    return problems


def _version_and_batch_problems(
    ensemble: EnsembleSpec, step: EnsembleStep, model: ModelSpec, label: str
) -> list[str]:
    """The step asks for a version the model lacks, or the model batches less than the
    ensemble."""
    problems = []
    if step.model_version not in (LATEST_VERSION, model.version):
        problems.append(
            f"{label}: model_version={step.model_version} but the model has only "
            f"version {model.version}"
        )
    if ensemble.max_batch_size > 0 and model.max_batch_size == 0:
        problems.append(
            f"{label}: model max_batch_size is 0 (no batching) but the ensemble "
            f"batches up to {ensemble.max_batch_size}"
        )
    elif 0 < model.max_batch_size < ensemble.max_batch_size:
        problems.append(
            f"{label}: model max_batch_size {model.max_batch_size} is smaller than the "
            f"ensemble's {ensemble.max_batch_size}"
        )
    return problems


def _producer_problems(producers: dict[str, list[_Port]]) -> list[str]:
    """Tensors produced more than once."""
    return [
        f"tensor {tensor_name!r} is produced {len(ports)} times: "
        + ", ".join(p.where for p in ports)
        for tensor_name, ports in sorted(producers.items())
        if len(ports) > 1
    ]


def _consumer_problems(
    producers: dict[str, list[_Port]], consumers: dict[str, list[_Port]]
) -> list[str]:
    """Tensors consumed but never produced, or produced with another type or shape."""
    problems = []
    for tensor_name in sorted(consumers):
        made = producers.get(tensor_name, [])
        for port in consumers[tensor_name]:
            if not made:
                problems.append(f"{port.where}: tensor {tensor_name!r} is never produced")
                continue
            source = made[0]
            if source.tensor.dtype != port.tensor.dtype:
                problems.append(
                    f"{port.where}: tensor {tensor_name!r} is {port.tensor.dtype.value} here "
                    f"but {source.tensor.dtype.value} from {source.where}"
                )
            if not _shapes_match(source.shape, port.shape):
                problems.append(
                    f"{port.where}: tensor {tensor_name!r} has shape {list(port.shape)} here "
                    f"but {list(source.shape)} from {source.where}"
                )
    return problems


def _cycle_problems(
    ensemble: EnsembleSpec,
    producers: dict[str, list[_Port]],
    consumers: dict[str, list[_Port]],
) -> list[str]:
    """Steps that depend on themselves through the tensors they exchange."""
    edges: dict[int, set[int]] = defaultdict(set)
    for tensor_name, made in producers.items():
        for source in made:
            for sink in consumers.get(tensor_name, []):
                if source.step is not None and sink.step is not None:
                    edges[source.step].add(sink.step)

    def reaches_itself(start: int) -> bool:
        seen: set[int] = set()
        todo = list(edges.get(start, ()))
        while todo:
            node = todo.pop()
            if node == start:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(edges.get(node, ()))
        return False

    cyclic = [i for i in range(len(ensemble.steps)) if reaches_itself(i)]
    if not cyclic:
        return []
    labels = ", ".join(_step_label(ensemble.steps[i]) for i in cyclic)
    tensors = sorted(
        name
        for name, made in producers.items()
        if any(p.step in cyclic for p in made)
        and any(c.step in cyclic for c in consumers.get(name, []))
    )
    return [f"cycle between steps: {labels} (through tensors {tensors})"]


def check_ensemble(ensemble: EnsembleSpec) -> None:
    """Raise :class:`EnsembleValidationError` listing every problem, if there is any."""
    problems = find_ensemble_problems(ensemble)
    if problems:
        raise EnsembleValidationError(ensemble.name, problems)
