"""Stand-in (local server only): a Python-backend model that runs an ONNX file with ONNX
Runtime on CPU, in place of a model whose backend the bundled server lacks (``onnxruntime``,
or ``tensorrt_plan`` when the ONNX the plan was built from is known).

Same name, inputs, outputs and batch size as the model it replaces; the ONNX path is the
config parameter ``STANDIN_ARTIFACT``. Written into an unpacked archive by
``ml_platform.triton.standins``; never shipped in an archive.
"""

# Annotations stay text: the server's pb_utils has no InferenceRequest when this file loads.
from __future__ import annotations

import json

import numpy as np
import onnxruntime
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        path = config["parameters"]["STANDIN_ARTIFACT"]["string_value"]
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(
            path, options, providers=["CPUExecutionProvider"]
        )
        self.inputs = [i["name"] for i in config["input"]]
        self.outputs = [
            (o["name"], pb_utils.triton_string_to_numpy(o["data_type"])) for o in config["output"]
        ]

    def execute(
        self, requests: list[pb_utils.InferenceRequest]
    ) -> list[pb_utils.InferenceResponse]:
        responses = []
        names = [name for name, _ in self.outputs]
        for request in requests:
            try:
                feeds = {
                    name: pb_utils.get_input_tensor_by_name(request, name).as_numpy()
                    for name in self.inputs
                }
                results = self.session.run(names, feeds)
                tensors = []
                for (name, dtype), array in zip(self.outputs, results, strict=False):
                    if array.dtype != dtype:  # what the real backend would refuse too
                        raise TypeError(f"{name}: ONNX gives {array.dtype}, config says {dtype}")
                    tensors.append(pb_utils.Tensor(name, np.ascontiguousarray(array)))
                responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            except Exception as exc:
                error = pb_utils.TritonError(f"onnx stand-in: {exc}")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
        return responses
