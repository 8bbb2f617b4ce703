"""Demo inputs for both ensembles, generated here: try packaging and serving with no download.

``mlp models demo --out DIR`` writes:

* ``classifier.onnx``: a small ONNX image classifier with Inception v3's interface (FP32
  ``[batch, 299, 299, 3]`` in, softmax over 1,001 classes out) that average-pools 23x23
  blocks and applies fixed random weights;
* ``labels.txt``: 1,001 class names (``demo class 0`` ...), one per output;
* ``encoder.onnx``: a text encoder with the interface ``python -m
  ml_platform.triton.export_onnx`` exports (``token_ids``, ``attn_mask`` INT32
  ``[batch, 256]`` in; ``output`` FP32 ``[batch, 256, 384]`` and ``pooled_embeds`` out) that
  looks each token id up in a fixed random table of 1,024 rows (``id mod 1024``);
* ``image.png``: a 640x480 test pattern for ``mlp invoke --image``.

These are DEMO WEIGHTS, NOT FOR PRODUCTION: the ranking of classes and the embeddings are
deterministic but meaningless (sentences that share words get similar vectors, nothing more).
They exercise the whole path (packaging, the archive checks, the real Triton server with
SageMaker's front end, the ensembles' Python and DALI steps, ``mlp invoke``) in seconds. For
real models, export the encoder with ``python -m ml_platform.triton.export_onnx`` and bring
your Inception v3 ONNX and its labels.

Only ``onnx`` and ``numpy`` (the ``[triton]`` extra) are needed; the PNG is written with the
standard library.
"""

from __future__ import annotations

import argparse
import functools
import struct
import sys
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

#: Inception v3's input side; the classifier pools blocks of this many pixels (299 = 13 * 23).
INCEPTION_SIZE = 299
_POOL = 23
#: Output classes of TF-slim's Inception v3 (background + 1,000).
CLASSES = 1001
#: The encoder's interface: export_onnx's default sequence length and MiniLM's hidden size.
SEQ_LEN = 256
HIDDEN = 384
#: Rows of the encoder's embedding table (token ids are taken modulo this).
TABLE_ROWS = 1024
_PRODUCER = "cdk-ml-platform demo weights (not for production)"

FILES = ("classifier.onnx", "labels.txt", "encoder.onnx", "image.png")


@functools.cache
def demo_classifier(
    *,
    classes: int = CLASSES,
    layout: str = "NHWC",
    seed: int = 0,
    input_name: str = "input",
    output_name: str = "InceptionV3/Predictions/Softmax",
    batch: int | str = "batch",
) -> bytes:
    """The serialized demo classifier: FP32 images ``[batch, 299, 299, 3]`` (or NCHW) in,
    softmax over ``classes`` out. Its ranking depends on every pixel's scale and offset, as a
    real classifier's does, so a wrong preprocessing shows."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    features = 3 * (INCEPTION_SIZE // _POOL) ** 2
    weights = rng.normal(0, 1, (features, classes)).astype(np.float32)
    bias = rng.normal(0, 0.1, (classes,)).astype(np.float32)
    side = INCEPTION_SIZE
    image_dims = [batch, side, side, 3] if layout == "NHWC" else [batch, 3, side, side]
    nodes = []
    pooled_input = input_name
    if layout == "NHWC":
        nodes.append(helper.make_node("Transpose", [input_name], ["nchw"], perm=[0, 3, 1, 2]))
        pooled_input = "nchw"
    nodes += [
        helper.make_node(
            "AveragePool",
            [pooled_input],
            ["pooled"],
            kernel_shape=[_POOL, _POOL],
            strides=[_POOL, _POOL],
        ),
        helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "weights"], ["projected"]),
        helper.make_node("Add", ["projected", "bias"], ["logits"]),
        helper.make_node("Softmax", ["logits"], [output_name], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "demo_classifier",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, image_dims)],
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, [batch, classes])],
        initializer=[
            numpy_helper.from_array(weights, "weights"),
            numpy_helper.from_array(bias, "bias"),
        ],
    )
    return _serialized(graph)


def demo_encoder(*, seq_len: int = SEQ_LEN, hidden: int = HIDDEN, seed: int = 1) -> bytes:
    """The serialized demo text encoder (export_onnx's interface): each token's vector is row
    ``id mod 1024`` of a fixed random table; ``pooled_embeds`` is the mean over the masked
    tokens."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    table = np.random.default_rng(seed).normal(0, 1, (TABLE_ROWS, hidden)).astype(np.float32)
    dims: list[str | int | None] = ["batch", seq_len]
    nodes = [
        helper.make_node("Cast", ["token_ids"], ["ids64"], to=TensorProto.INT64),
        helper.make_node("Mod", ["ids64", "rows"], ["rows_of_ids"]),
        helper.make_node("Gather", ["table", "rows_of_ids"], ["output"], axis=0),
        helper.make_node("Cast", ["attn_mask"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask", "last"], ["mask3"]),
        helper.make_node("Mul", ["output", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "tokens"], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["mask", "tokens"], ["count"], keepdims=1),
        helper.make_node("Max", ["count", "one"], ["count1"]),
        helper.make_node("Div", ["summed", "count1"], ["pooled_embeds"]),
    ]
    graph = helper.make_graph(
        nodes,
        "demo_encoder",
        [
            helper.make_tensor_value_info("token_ids", TensorProto.INT32, dims),
            helper.make_tensor_value_info("attn_mask", TensorProto.INT32, dims),
        ],
        [
            helper.make_tensor_value_info("output", TensorProto.FLOAT, [*dims, hidden]),
            helper.make_tensor_value_info("pooled_embeds", TensorProto.FLOAT, ["batch", hidden]),
        ],
        initializer=[
            numpy_helper.from_array(table, "table"),
            numpy_helper.from_array(np.array(TABLE_ROWS, dtype=np.int64), "rows"),
            numpy_helper.from_array(np.array([-1], dtype=np.int64), "last"),
            numpy_helper.from_array(np.array([1], dtype=np.int64), "tokens"),
            numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one"),
        ],
    )
    return _serialized(graph)


def _serialized(graph: Any) -> bytes:
    import onnx
    from onnx import helper

    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name=_PRODUCER
    )
    model.ir_version = 8  # what onnxruntime 1.x and Triton's onnxruntime backend read
    onnx.checker.check_model(model)
    data: bytes = model.SerializeToString()
    return data


def demo_labels(classes: int = CLASSES) -> str:
    """One demo class name per classifier output."""
    return "".join(f"demo class {i}\n" for i in range(classes))


def pattern_picture(height: int = 480, width: int = 640, seed: int = 7) -> np.ndarray:
    """An RGB uint8 picture of gradients, stripes and noise (a wrong resize shows)."""
    import numpy as np

    rows, cols = np.mgrid[0:height, 0:width]
    noise = np.random.default_rng(seed).integers(0, 8, (height, width), dtype=np.uint16)
    red = (cols * 255 // max(width - 1, 1)).astype(np.uint16)
    green = (rows * 255 // max(height - 1, 1)).astype(np.uint16)
    blue = ((rows // 16 + cols // 16) % 2 * 200).astype(np.uint16)
    image = np.stack([red, green, blue], axis=-1) + noise[..., None]
    return np.clip(image, 0, 255).astype(np.uint8)


def png(image: np.ndarray) -> bytes:
    """``image`` (RGB uint8 ``[height, width, 3]``) as a PNG file (8-bit truecolour, no
    filter), per the PNG specification (https://www.w3.org/TR/png-3/)."""
    height, width, _ = image.shape
    raw = b"".join(b"\x00" + image[row].tobytes() for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


def write_demo_inputs(out: Path) -> list[Path]:
    """Write every demo file into ``out`` (created if needed); returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    contents = {
        "classifier.onnx": demo_classifier(),
        "labels.txt": demo_labels().encode(),
        "encoder.onnx": demo_encoder(),
        "image.png": png(pattern_picture()),
    }
    paths = []
    for name in FILES:
        (out / name).write_bytes(contents[name])
        paths.append(out / name)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ml_platform.triton.demo_models",
        description="Write demo models (not for production) for both ensembles.",
    )
    parser.add_argument("--out", type=Path, required=True, help="folder to write them into")
    args = parser.parse_args(argv)
    for path in write_demo_inputs(args.out):
        print(f"{path}  {path.stat().st_size / 1024:,.1f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
