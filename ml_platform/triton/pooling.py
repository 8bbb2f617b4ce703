"""Sentence-embedding pooling in plain NumPy.

This file is copied verbatim next to the ``postprocess`` model's ``model.py`` (Triton's
Python backend has no ``ml_platform`` installed), so it imports nothing but NumPy.
"""

from __future__ import annotations

import numpy as np

# The sentence-transformers recipe: clamp the token count, then normalise with a floor.
_MIN_TOKENS = 1e-9
_MIN_NORM = 1e-12


def mean_pool_normalize(token_embeddings: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Average token embeddings over the attention mask, then scale each row to unit length.

    Args:
        token_embeddings: ``[batch, seq_len, hidden]`` encoder output.
        attention_mask: ``[batch, seq_len]``; 1 for real tokens, 0 for padding.

    Returns:
        ``[batch, hidden]`` float32 sentence embeddings with L2 norm 1 (all-zero rows,
        from an all-padding mask, stay zero).
    """
    embeddings = np.asarray(token_embeddings, dtype=np.float32)
    mask = np.asarray(attention_mask, dtype=np.float32)
    if embeddings.ndim != 3 or mask.shape != embeddings.shape[:2]:
        raise ValueError(
            f"expected embeddings [batch, seq, hidden] and mask [batch, seq], got "
            f"{embeddings.shape} and {mask.shape}"
        )
    weights = mask[:, :, None]
    summed = (embeddings * weights).sum(axis=1)
    counts = np.maximum(weights.sum(axis=1), _MIN_TOKENS)
    mean = summed / counts
    norms = np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), _MIN_NORM)
    pooled: np.ndarray = (mean / norms).astype(np.float32)
    return pooled
