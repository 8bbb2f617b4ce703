"""Stand-in (local server only): a Python-backend model that runs an archive's Python-defined
DALI model (``dali/1/dali.py``) with DALI's CPU operators, in place of the ``dali`` backend
the bundled server lacks.

Same name, inputs, outputs, batch size and dynamic batching as the model it replaces; the path
of the archive's own ``dali.py`` is the config parameter ``STANDIN_ARTIFACT``. The file is
imported as the DALI backend imports it (from its path, under its own module name), and its
``preprocess`` graph is built over an external source named like the model input, with the
decoder on the CPU instead of ``mixed`` (GPU): every other operator and argument is the
file's own. The pipeline's batch size is the model's ``max_batch_size``, as the DALI backend
builds it. Written into an unpacked archive by ``ml_platform.triton.standins``; never shipped
in an archive.
"""

# Annotations stay text: the server's pb_utils has no InferenceRequest when this file loads.
from __future__ import annotations

import importlib.util
import json
from types import ModuleType

import numpy as np
import triton_python_backend_utils as pb_utils
from nvidia.dali import fn, pipeline_def
from nvidia.dali.data_node import DataNode


def _load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("standin_dali_pipeline", path)
    if spec is None or spec.loader is None:  # only for a path that is not a Python file
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        module = _load(config["parameters"]["STANDIN_ARTIFACT"]["string_value"])
        (source,) = [i["name"] for i in config["input"]]
        if source != module.INPUT_NAME:
            raise ValueError(f"input {source!r}, but dali.py reads {module.INPUT_NAME!r}")
        self.input = source
        self.outputs = [
            (o["name"], pb_utils.triton_string_to_numpy(o["data_type"])) for o in config["output"]
        ]
        self.max_batch = int(config["max_batch_size"])

        # DALI's overloads type device_id as int; None (CPU only) is what its Pipeline documents.
        @pipeline_def(  # type: ignore[call-overload,untyped-decorator]
            batch_size=self.max_batch, num_threads=1, device_id=None, prefetch_queue_depth=1
        )
        def cpu_pipeline() -> DataNode:
            graph: DataNode = module.preprocess(
                fn.external_source(device="cpu", name=source), "cpu"
            )
            return graph

        self.pipeline = cpu_pipeline()
        self.pipeline.build()

    def _run(self, samples: list[np.ndarray]) -> list[tuple[str, np.ndarray]]:
        self.pipeline.feed_input(self.input, samples)
        results = self.pipeline.run()
        if len(results) != len(self.outputs):
            raise ValueError(
                f"dali.py gives {len(results)} outputs, config has {len(self.outputs)}"
            )
        arrays = []
        for (name, dtype), batch in zip(self.outputs, results, strict=False):
            array = np.stack([np.array(batch[i]) for i in range(len(samples))])
            if array.dtype != dtype:  # what the real backend would refuse too
                raise TypeError(f"{name}: DALI gives {array.dtype}, config says {dtype}")
            arrays.append((name, array))
        return arrays

    def execute(
        self, requests: list[pb_utils.InferenceRequest]
    ) -> list[pb_utils.InferenceResponse]:
        responses = []
        for request in requests:
            try:
                # Each row of [batch, bytes] is one encoded sample, as the DALI backend reads it.
                rows = pb_utils.get_input_tensor_by_name(request, self.input).as_numpy()
                if not 0 < len(rows) <= self.max_batch:
                    raise ValueError(f"batch of {len(rows)}: expected 1 to {self.max_batch}")
                samples = [np.ascontiguousarray(row, dtype=np.uint8) for row in rows]
                tensors = [
                    pb_utils.Tensor(name, np.ascontiguousarray(array))
                    for name, array in self._run(samples)
                ]
                responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            except Exception as exc:
                error = pb_utils.TritonError(f"dali stand-in: {exc}")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
        return responses
