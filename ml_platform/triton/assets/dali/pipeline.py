"""DALI pipeline of the image ensemble: encoded image -> Inception v3 input tensor.

Steps: decode on the GPU (``mixed``) to RGB, resize to 299x299, normalise each channel
with the ImageNet mean and standard deviation, keep the HWC layout. The external source
is named like the Triton model input (``DALI_INPUT_0``); the DALI backend names the
outputs ``DALI_OUTPUT_<i>`` in order.

Needs ``nvidia-dali`` (the CUDA build matching the machine); run it where that is
installed, ideally the Triton container itself, so the DALI versions agree::

    python pipeline.py path/to/model.dali [--batch-size 256] [--device-id 0]

The result goes to ``dali/1/model.dali`` (pass its path to
``ml_platform.triton.image_ensemble(dali_model_path=...)``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

INPUT_NAME = "DALI_INPUT_0"
IMAGE_SIZE = 299
# ImageNet channel statistics, scaled to 0..255 pixel values (RGB order).
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


def build_pipeline(batch_size: int = 256, num_threads: int = 4, device_id: int = 0):
    """The DALI pipeline object (imports ``nvidia.dali`` here, not at module load)."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=device_id)
    def image_pipeline():
        encoded = fn.external_source(device="cpu", name=INPUT_NAME)
        images = fn.decoders.image(encoded, device="mixed", output_type=types.RGB)
        images = fn.resize(images, resize_x=IMAGE_SIZE, resize_y=IMAGE_SIZE)
        return fn.crop_mirror_normalize(
            images, dtype=types.FLOAT, output_layout="HWC", mean=list(MEAN), std=list(STD)
        )

    return image_pipeline()


def serialize(out_path: str | Path, batch_size: int = 256, device_id: int = 0) -> Path:
    """Build the pipeline and write its serialized form (``model.dali``) to ``out_path``."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    build_pipeline(batch_size=batch_size, device_id=device_id).serialize(filename=str(out))
    return out


def main(argv: list[str] | None = None) -> None:
    """Command line: serialize the pipeline to the given path."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_path", type=Path, help="where to write model.dali")
    parser.add_argument("--batch-size", type=int, default=256, help="max batch (default 256)")
    parser.add_argument("--device-id", type=int, default=0, help="GPU id (default 0)")
    args = parser.parse_args(argv)
    print(serialize(args.out_path, batch_size=args.batch_size, device_id=args.device_id))


if __name__ == "__main__":
    main()
