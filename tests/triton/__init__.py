"""Tests of the Triton model-repository builder (ml_platform.triton)."""
