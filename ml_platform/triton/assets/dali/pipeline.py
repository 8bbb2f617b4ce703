"""DALI pipeline of the image ensemble: encoded image -> Inception v3 input tensor.

Steps: decode to RGB (on the GPU: ``mixed``), take the central 87.5% of the image and
resize it to 299x299 (bilinear), scale pixels from [0, 255] to [-1, 1], keep the HWC layout.
That is the evaluation preprocessing this Inception v3 graph (TF-slim) was trained and
evaluated with, not ImageNet mean/std normalisation:

* TF-slim ``inception_preprocessing.preprocess_for_eval``: ``central_crop(0.875)``,
  ``resize_bilinear`` to 299x299, then ``(x - 0.5) * 2`` on [0, 1] pixels,
  https://github.com/tensorflow/models/blob/master/research/slim/preprocessing/inception_preprocessing.py
* Triton's image client scales Inception inputs the same way (``scaling INCEPTION``:
  ``x / 127.5 - 1``),
  https://github.com/triton-inference-server/client/blob/main/src/python/examples/image_client.py

The external source is named like the Triton model input (``DALI_INPUT_0``); the DALI
backend names the outputs ``DALI_OUTPUT_<i>`` in order.

Serializing needs ``nvidia-dali`` but no GPU: the pipeline is built with ``device_id=None``
and Triton's DALI backend runs it on the GPU of each model instance (it creates the pipeline
from the serialized bytes with its own batch size, threads and the instance's device id:
``CreatePipeline`` in
https://github.com/triton-inference-server/dali_backend/blob/main/src/dali_executor/dali_pipeline.h).
``mlp models package`` does it when ``--dali-model`` is not given; by hand::

    python pipeline.py path/to/model.dali [--batch-size 256]
"""

from __future__ import annotations

import argparse
from pathlib import Path

INPUT_NAME = "DALI_INPUT_0"
IMAGE_SIZE = 299
#: TF-slim's evaluation crop: the central 87.5% of each side.
CENTRAL_FRACTION = 0.875
# crop_mirror_normalize computes (x - mean) / std: [0, 255] -> [-1, 1].
MEAN = (127.5, 127.5, 127.5)
STD = (127.5, 127.5, 127.5)


def build_pipeline(
    batch_size: int = 256,
    num_threads: int = 4,
    device_id: int | None = None,
    decoder_device: str = "mixed",
):
    """The DALI pipeline object (imports ``nvidia.dali`` here, not at module load).

    ``decoder_device="mixed"`` decodes on the GPU (what Triton runs); ``"cpu"`` gives the
    same pipeline with CPU operators only, to run it where there is no GPU (tests).
    """
    from nvidia.dali import fn, pipeline_def, types

    margin = (1.0 - CENTRAL_FRACTION) / 2

    @pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=device_id)
    def image_pipeline():
        encoded = fn.external_source(device="cpu", name=INPUT_NAME)
        images = fn.decoders.image(encoded, device=decoder_device, output_type=types.RGB)
        images = fn.resize(
            images,
            resize_x=IMAGE_SIZE,
            resize_y=IMAGE_SIZE,
            roi_start=(margin, margin),
            roi_end=(1.0 - margin, 1.0 - margin),
            roi_relative=True,
            interp_type=types.INTERP_LINEAR,
        )
        return fn.crop_mirror_normalize(
            images, dtype=types.FLOAT, output_layout="HWC", mean=list(MEAN), std=list(STD)
        )

    return image_pipeline()


def serialize(out_path: str | Path, batch_size: int = 256) -> Path:
    """Build the pipeline and write its serialized form (``model.dali``) to ``out_path``."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    build_pipeline(batch_size=batch_size).serialize(filename=str(out))
    return out


def main(argv: list[str] | None = None) -> None:
    """Command line: serialize the pipeline to the given path."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_path", type=Path, help="where to write model.dali")
    parser.add_argument("--batch-size", type=int, default=256, help="max batch (default 256)")
    args = parser.parse_args(argv)
    print(serialize(args.out_path, batch_size=args.batch_size))


if __name__ == "__main__":
    main()
