"""DALI pipeline of the image ensemble, as a Python-defined DALI model (``dali/1/dali.py``).

Encoded image -> the classifier's input tensor: decode to RGB (on the GPU: ``mixed``), take
the central 87.5% of the image, resize it to 299x299 (bilinear), normalise each channel as
``(x - MEAN) / STD`` on [0, 255] pixels, in the classifier's layout (HWC or CHW).

The default normalisation is the one the TF-slim Inception v3 was trained and evaluated with,
pixels scaled to [-1, 1] (``MEAN = STD = 127.5``), not ImageNet mean/std:

* TF-slim ``inception_preprocessing.preprocess_for_eval``: ``central_crop(0.875)``,
  ``resize_bilinear`` to 299x299, then ``(x - 0.5) * 2`` on [0, 1] pixels,
  https://github.com/tensorflow/models/blob/master/research/slim/preprocessing/inception_preprocessing.py
* Triton's image client scales Inception inputs the same way (``scaling INCEPTION``),
  https://github.com/triton-inference-server/client/blob/main/src/python/examples/image_client.py

``mlp models package`` writes the values of the block between the ``mlp:settings`` markers
(the mean/std and layout of the classifier it packages); nothing else in this file changes.

Why a Python file, not a serialized ``model.dali``: Triton's DALI backend finds no
``model.dali`` and then serializes the ``@autoserialize`` pipeline of ``dali.py`` itself,
with the DALI of the container it runs in (dali_backend README, "Autoserialization": "DALI
Backend uses internal serialization mechanism"; it runs ``python3 -c ... invoke_autoserialize``,
``src/model_provider/model_provider.h``):
https://github.com/triton-inference-server/dali_backend/blob/r25.09/README.md#autoserialization
A pipeline serialized with a newer DALI carries arguments an older one rejects, and the
serialized form embeds the path of the file that defined it, so a prebuilt ``model.dali``
neither loads everywhere nor packages reproducibly.

So this file uses only the DALI Python API that every supported container's DALI has: the
oldest is DALI 1.31 (Triton 23.12-24.03; file ``DALI_VERSION`` of dali_backend ``r23.12``),
24.09 has 1.39.0, the default release 25.09 has DALI 1.51.2 (``r25.09``), 26.05 has 2.1.0
(``ml_platform.sagemaker_images.TRITON_RELEASES``). The operators and keyword arguments used
here are pinned in ``tests/unit/triton/test_dali_pipeline.py``.

The backend creates the pipeline from the serialized bytes with the model's
``max_batch_size`` and each instance's own device, as every GPU pipeline of dali_backend's
examples and QA declares it: ``device_id=0`` (serializing needs no GPU; the CPU test harness,
``tests/helpers/triton_support.dali_on_cpu``, builds its own CPU pipeline from
``preprocess``). The external source is named like the model input (``DALI_INPUT_0``); the
backend names the outputs ``DALI_OUTPUT_<i>`` in order.
"""

# Only the DALI API of the oldest supported containers (tests/unit/triton/test_dali_pipeline.py);
# `nvidia.dali` for the annotations. `types` has RGB, FLOAT and INTERP_LINEAR from a compiled
# module (`from nvidia.dali.backend_impl.types import *`) that mypy cannot read.
import nvidia.dali
import nvidia.dali.fn as fn
import nvidia.dali.types as types
from nvidia.dali import pipeline_def
from nvidia.dali.plugin.triton import autoserialize

INPUT_NAME = "DALI_INPUT_0"
IMAGE_SIZE = 299
#: TF-slim's evaluation crop: the central 87.5% of each side.
CENTRAL_FRACTION = 0.875

# mlp:settings begin
MEAN = (127.5, 127.5, 127.5)
STD = (127.5, 127.5, 127.5)
OUTPUT_LAYOUT = "HWC"
NUM_THREADS = 4
# mlp:settings end


def preprocess(
    encoded: "nvidia.dali.data_node.DataNode", decoder_device: str
) -> "nvidia.dali.data_node.DataNode":
    """The preprocessing graph from encoded bytes; ``decoder_device`` ``"mixed"`` decodes on
    the GPU (what Triton runs), ``"cpu"`` runs everywhere (tests)."""
    margin = (1.0 - CENTRAL_FRACTION) / 2
    images = fn.decoders.image(
        encoded,
        device=decoder_device,
        output_type=types.RGB,  # type: ignore[attr-defined]  # compiled enum, see the imports
    )
    # DALI types every operator as returning one, many or no outputs; resize returns one.
    images = fn.resize(  # type: ignore[assignment]
        images,
        resize_x=IMAGE_SIZE,
        resize_y=IMAGE_SIZE,
        roi_start=(margin, margin),
        roi_end=(1.0 - margin, 1.0 - margin),
        roi_relative=True,
        interp_type=types.INTERP_LINEAR,  # type: ignore[attr-defined]  # compiled enum, see the imports
    )
    return fn.crop_mirror_normalize(
        images,
        dtype=types.FLOAT,  # type: ignore[attr-defined]  # compiled enum, see the imports
        output_layout=OUTPUT_LAYOUT,
        mean=list(MEAN),
        std=list(STD),
    )


# autoserialize has no annotations, so the decorated function is untyped (device_id=0 is what
# DALI types it as): https://docs.nvidia.com/deeplearning/dali/user-guide/docs/pipeline.html
@autoserialize  # type: ignore[untyped-decorator]
@pipeline_def(batch_size=256, num_threads=NUM_THREADS, device_id=0)
def image_pipeline() -> "nvidia.dali.data_node.DataNode":
    """What the DALI backend serializes and runs."""
    return preprocess(fn.external_source(device="cpu", name=INPUT_NAME), "mixed")
