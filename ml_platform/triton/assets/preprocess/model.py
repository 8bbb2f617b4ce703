"""Triton Python-backend model ``preprocess``: sentences -> token ids and attention mask.

Runs inside Triton, not in ``ml_platform``, and needs nothing beyond what the stock Triton
container's Python has (NumPy and the standard library). Layout of the model folder::

    preprocess/config.pbtxt
    preprocess/1/model.py          (this file)
    preprocess/1/wordpiece.py      (copy of ml_platform/triton/wordpiece.py)
    preprocess/1/tokenizer/...     (vocab.txt, tokenizer_config.json, ...: from the archive)

The tokenizer is the BERT WordPiece tokenizer of ``wordpiece.py`` over the bundled
``vocab.txt``, configured by the bundled ``tokenizer_config.json`` (lower-casing, accent
stripping, CJK splitting): no download, no ``transformers``.

Input ``INPUT0``: STRING ``[batch, 1]``. Outputs ``OUTPUT0`` (token ids) and ``OUTPUT1``
(attention mask): ``[batch, max_seq_len]``, padded to ``max_seq_len``, which is read from
the outputs' dims in ``config.pbtxt``.
"""

# Annotations stay text: the server's pb_utils has no InferenceRequest when this file loads.
from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import triton_python_backend_utils as pb_utils

INPUT_NAME = "INPUT0"
IDS_NAME = "OUTPUT0"
MASK_NAME = "OUTPUT1"
TOKENIZER_FOLDER = "tokenizer"


class _Tokenizer(Protocol):
    """What this model uses of ``wordpiece.WordPieceTokenizer`` (not importable here)."""

    def encode(self, texts: Sequence[str], max_length: int) -> tuple[np.ndarray, np.ndarray]: ...


def _decode(values: np.ndarray) -> list[str]:
    """Triton STRING elements (bytes) as Python strings, one per batch row."""
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values.reshape(-1)]


def _load_tokenizer(folder: Path) -> _Tokenizer:
    """``WordPieceTokenizer`` from the ``wordpiece.py`` beside this file, over ``folder``.

    Loaded by path so that it neither depends on ``sys.path`` nor clashes with an
    installed module of the same name.
    """
    path = Path(__file__).resolve().parent / "wordpiece.py"
    spec = importlib.util.spec_from_file_location("_triton_preprocess_wordpiece", path)
    if spec is None or spec.loader is None:  # only for a path that is not a Python file
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tokenizer: _Tokenizer = module.WordPieceTokenizer.from_dir(folder)
    return tokenizer


class TritonPythonModel:
    """Tokenizes each request's sentences with the bundled vocabulary."""

    def initialize(self, args: dict[str, str]) -> None:
        """Read output shapes and types from the config and load the tokenizer once."""
        config = json.loads(args["model_config"])
        ids_config = pb_utils.get_output_config_by_name(config, IDS_NAME)
        mask_config = pb_utils.get_output_config_by_name(config, MASK_NAME)
        self.max_seq_len = int(ids_config["dims"][-1])
        self.ids_dtype = pb_utils.triton_string_to_numpy(ids_config["data_type"])
        self.mask_dtype = pb_utils.triton_string_to_numpy(mask_config["data_type"])
        self.tokenizer = _load_tokenizer(Path(__file__).resolve().parent / TOKENIZER_FOLDER)

    def execute(
        self, requests: list[pb_utils.InferenceRequest]
    ) -> list[pb_utils.InferenceResponse]:
        """One response per request; a failing request gets an error, not the batch."""
        responses = []
        for request in requests:
            try:
                texts = _decode(pb_utils.get_input_tensor_by_name(request, INPUT_NAME).as_numpy())
                ids, mask = self.tokenizer.encode(texts, self.max_seq_len)
                outputs = [
                    pb_utils.Tensor(IDS_NAME, ids.astype(self.ids_dtype)),
                    pb_utils.Tensor(MASK_NAME, mask.astype(self.mask_dtype)),
                ]
                responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
            except Exception as exc:
                error = pb_utils.TritonError(f"preprocess: {exc}")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
        return responses

    def finalize(self) -> None:
        """Drop the tokenizer."""
        self.tokenizer = None  # type: ignore[assignment]  # unloaded: execute is not called again
