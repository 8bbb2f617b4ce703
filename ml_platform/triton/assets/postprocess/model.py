"""Triton Python-backend model ``postprocess``: token embeddings -> sentence embedding.

Runs inside Triton, not in ``ml_platform``. Layout of the model folder::

    postprocess/config.pbtxt
    postprocess/1/model.py     (this file)
    postprocess/1/pooling.py   (copy of ml_platform/triton/pooling.py, NumPy only)

Inputs ``TOKEN_EMBEDDINGS`` FP32 ``[batch, max_seq_len, hidden]`` and ``ATTENTION_MASK``
``[batch, max_seq_len]``; output ``SENT_EMBED`` ``[batch, hidden]``: the mean of the
real tokens' embeddings, scaled to unit length (the sentence-transformers recipe).
"""

# Annotations stay text: the server's pb_utils has no InferenceRequest when this file loads.
from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

EMBEDDINGS_NAME = "TOKEN_EMBEDDINGS"
MASK_NAME = "ATTENTION_MASK"
OUTPUT_NAME = "SENT_EMBED"


def _load_pooling() -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``mean_pool_normalize`` from the ``pooling.py`` beside this file.

    Loaded by path so that it neither depends on ``sys.path`` nor clashes with an
    installed module of the same name.
    """
    path = Path(__file__).resolve().parent / "pooling.py"
    spec = importlib.util.spec_from_file_location("_triton_postprocess_pooling", path)
    if spec is None or spec.loader is None:  # only for a path that is not a Python file
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pool: Callable[[np.ndarray, np.ndarray], np.ndarray] = module.mean_pool_normalize
    return pool


class TritonPythonModel:
    """Pools each request's token embeddings into one normalised vector per sentence."""

    def initialize(self, args: dict[str, str]) -> None:
        """Read the output type from the config and load the pooling function."""
        config = json.loads(args["model_config"])
        output_config = pb_utils.get_output_config_by_name(config, OUTPUT_NAME)
        self.output_dtype = pb_utils.triton_string_to_numpy(output_config["data_type"])
        self.pool = _load_pooling()

    def execute(
        self, requests: list[pb_utils.InferenceRequest]
    ) -> list[pb_utils.InferenceResponse]:
        """One response per request; a failing request gets an error, not the batch."""
        responses = []
        for request in requests:
            try:
                embeddings = pb_utils.get_input_tensor_by_name(request, EMBEDDINGS_NAME).as_numpy()
                mask = pb_utils.get_input_tensor_by_name(request, MASK_NAME).as_numpy()
                pooled = self.pool(embeddings, mask).astype(self.output_dtype)
                output = pb_utils.Tensor(OUTPUT_NAME, pooled)
                responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
            except Exception as exc:
                error = pb_utils.TritonError(f"postprocess: {exc}")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
        return responses

    def finalize(self) -> None:
        """Nothing to release."""
