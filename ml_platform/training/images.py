"""Pinned container images and sources of the training workloads, in one place.

Every value is a fixed version, never ``latest``: a manifest or image build that is
reviewed once behaves the same when it is applied again.
"""

from __future__ import annotations

__all__ = [
    "AWS_CLI_IMAGE",
    "BUSYBOX_IMAGE",
    "DATASET_TOOLS_IMAGE",
    "HF_SEED_IMAGE",
    "NEURON_SAMPLES_COMMIT",
    "NEURON_SAMPLES_DIR",
    "NEURON_SAMPLES_FILES",
    "NEURON_TRAINING_BASE_IMAGE",
    "SAMPLE_REQUIREMENTS",
    "SAMPLE_REQUIREMENTS_TXT",
    "TENSORBOARD_IMAGE",
]

from ml_platform.versions import TRN1_NEURON_STACK

# The PyTorch/XLA Neuron training DLC of the last SDK that supports XLA training (Neuron
# 2.29.1), pinned beside the AL2023 Neuron AMI release with the same SDK's driver:
# ml_platform.versions.TRN1_NEURON_STACK has both and their sources.
NEURON_TRAINING_BASE_IMAGE = TRN1_NEURON_STACK.training_image

# aws-neuron/aws-neuron-samples commit holding torch-neuronx/training/dp_bert_hf_pretrain
# ("Neuron Release 2.23.0", 2025-05-20, the folder's last change; unchanged at 2026-05 HEAD).
NEURON_SAMPLES_COMMIT = "dd0e71f0041f9eb4a5fd3e070df5638d48a67285"
NEURON_SAMPLES_DIR = "torch-neuronx/training/dp_bert_hf_pretrain"
# File -> sha256 of its bytes at NEURON_SAMPLES_COMMIT (the script imports the three
# optimizer modules from its own folder; requirements.txt lists its Python dependencies).
NEURON_SAMPLES_FILES: dict[str, str] = {
    "dp_bert_large_hf_pretrain_hdf5.py": (
        "8cb9bd61592d3a8c0db3844f53a01415c6ac09eab9f33f0dbbc6de5a7891cc43"
    ),
    "adamw_fp32_optim_params.py": (
        "0706c68035c3f9a66315ea9097dc79d28a0c94b67a6e05a9c9f1060cfca6fbae"
    ),
    "adamw_fp32_params_copy.py": (
        "49a2ffff9636f8367f63fc4ca600b63500f511a5bed4180771bf3a61c355c6c9"
    ),
    "lamb.py": ("fdd5e1c9efaaa6bda2b3b5d0a1556da07bed42c887c9732b898a8ef4590fe0d0"),
    "requirements.txt": ("ce8f6601e59aaac2346200715ba95ba47eb50e4b33d32956ad8cdd32e64094eb"),
}

# The sample's requirements.txt at NEURON_SAMPLES_COMMIT, entry by entry (name -> its pin,
# None where the sample leaves the version open). sample-requirements.lock pins and hashes
# each; a test keeps the two in step, and another checks this table against the file's text
# (SAMPLE_REQUIREMENTS_TXT, whose sha256 is the one the build checks).
SAMPLE_REQUIREMENTS: dict[str, str | None] = {
    "graphviz": None,
    "tensorboard": "2.14",
    "transformers": "4.44.0",
    "evaluate": None,
    "pillow": None,
    "pytest": None,
    "accelerate": None,
    "datasets": "2.19.1",
    "sentencepiece": "0.2.0",
    "h5py": None,
    "requests": "2.31.0",
    "huggingface-hub": "0.24.5",
}

# The exact text of requirements.txt at NEURON_SAMPLES_COMMIT (its sha256 is
# NEURON_SAMPLES_FILES["requirements.txt"]), read from aws-neuron/aws-neuron-samples at that
# commit. An earlier table said requests 2.32.2 "as the sample's"; the file pins 2.31.0, and
# the build's second, unhashed install of this file then downgraded the locked 2.32.2.
SAMPLE_REQUIREMENTS_TXT = """\
graphviz
tensorboard==2.14
transformers==4.44.0
evaluate
pillow
pytest
accelerate
datasets==2.19.1
sentencepiece==0.2.0
h5py
requests==2.31.0
huggingface-hub==0.24.5
"""

# AWS CLI v2 on Amazon Linux 2 (no tar inside). Source: ECR Public gallery aws-cli/aws-cli.
AWS_CLI_IMAGE = "public.ecr.aws/aws-cli/aws-cli:2.36.49"

# BusyBox tar extracts the dataset. Source: ECR Public mirror of the Docker official image.
BUSYBOX_IMAGE = "public.ecr.aws/docker/library/busybox:1.37.0"

# TensorFlow CPU image; its pip tensorflow ships the `tensorboard` command.
# Source: Docker Hub tensorflow/tensorflow, release 2.20.0.
TENSORBOARD_IMAGE = "docker.io/tensorflow/tensorflow:2.20.0"

# The dataset Job's hf-cache step (ml_platform/training/hf_seed.py): the official Python image,
# slim (Debian, pip included), from ECR Public (no Docker Hub pull limit). Python 3.12 as the
# training image's (py312), so the step's wheels are cp312 like sample-requirements.lock's.
# Tag from docker-library/official-images `library/python` at 37079fb3 (2026-08-21):
# "Tags: 3.12.14-slim-trixie, 3.12-slim-trixie, 3.12.14-slim, 3.12-slim" (amd64 among its
# architectures); ECR Public's docker/library mirrors the Docker official images.
HF_SEED_IMAGE = "public.ecr.aws/docker/library/python:3.12.14-slim"

# python3 for the dataset Job's extract step (standard library only): the TensorBoard image,
# which the system nodes pull anyway, rather than one more image to pin.
DATASET_TOOLS_IMAGE = TENSORBOARD_IMAGE
