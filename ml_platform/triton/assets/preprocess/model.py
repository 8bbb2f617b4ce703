"""Triton Python-backend model ``preprocess``: sentences -> token ids and attention mask.

Runs inside Triton, not in ``ml_platform``. Layout of the model folder::

    preprocess/config.pbtxt
    preprocess/1/model.py          (this file)
    preprocess/1/tokenizer/...     (tokenizer files, shipped in the archive)

The tokenizer is loaded from the shipped files only (``local_files_only``): endpoints
often have no internet access, and a download at load time makes startup slow and
fragile. ``transformers`` comes from the execution environment named by the
``EXECUTION_ENV_PATH`` parameter (or the container's own Python).

Input ``INPUT0``: STRING ``[batch, 1]``. Outputs ``OUTPUT0`` (token ids) and ``OUTPUT1``
(attention mask): ``[batch, max_seq_len]``, padded to ``max_seq_len``, which is read from
the outputs' dims in ``config.pbtxt``.
"""

import json
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

INPUT_NAME = "INPUT0"
IDS_NAME = "OUTPUT0"
MASK_NAME = "OUTPUT1"
TOKENIZER_FOLDER = "tokenizer"


def _decode(values: np.ndarray) -> list:
    """Triton STRING elements (bytes) as Python strings, one per batch row."""
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values.reshape(-1)]


class TritonPythonModel:
    """Tokenizes each request's sentences with the bundled tokenizer."""

    def initialize(self, args):
        """Read output shapes and types from the config and load the tokenizer once."""
        from transformers import AutoTokenizer

        config = json.loads(args["model_config"])
        ids_config = pb_utils.get_output_config_by_name(config, IDS_NAME)
        mask_config = pb_utils.get_output_config_by_name(config, MASK_NAME)
        self.max_seq_len = int(ids_config["dims"][-1])
        self.ids_dtype = pb_utils.triton_string_to_numpy(ids_config["data_type"])
        self.mask_dtype = pb_utils.triton_string_to_numpy(mask_config["data_type"])
        tokenizer_dir = Path(__file__).resolve().parent / TOKENIZER_FOLDER
        self.tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)

    def execute(self, requests):
        """One response per request; a failing request gets an error, not the batch."""
        responses = []
        for request in requests:
            try:
                texts = _decode(pb_utils.get_input_tensor_by_name(request, INPUT_NAME).as_numpy())
                encoded = self.tokenizer(
                    texts,
                    padding="max_length",
                    truncation=True,
                    max_length=self.max_seq_len,
                    return_tensors="np",
                )
                outputs = [
                    pb_utils.Tensor(IDS_NAME, encoded["input_ids"].astype(self.ids_dtype)),
                    pb_utils.Tensor(MASK_NAME, encoded["attention_mask"].astype(self.mask_dtype)),
                ]
                responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
            except Exception as exc:
                error = pb_utils.TritonError(f"preprocess: {exc}")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
        return responses

    def finalize(self):
        """Drop the tokenizer."""
        self.tokenizer = None
