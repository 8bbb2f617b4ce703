"""The exported encoder (once per session), from the Triton server tests' conftest
(tests/e2e/triton/conftest.py), for the CPU run of the text ensemble."""

from __future__ import annotations

from tests.e2e.triton.conftest import onnx_encoder

__all__ = ["onnx_encoder"]
