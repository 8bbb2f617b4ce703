"""The dataset Job's ``hf-cache`` step: seed the shared Hugging Face cache with the files the
training script's model load reads, so the training pods load them offline.

Runs in the Job's ``hf-cache`` container (a small Python image, not the multi-GB training
image) as the Job's non-root user with a read-only root file system, from the ConfigMap that
holds this file next to :data:`REQUIREMENTS_FILE`::

    python3 -I /opt/dataset-tools/hf_seed.py

1. pip installs ``huggingface-hub`` (the sample's pin) and exactly its dependencies, each
   pinned with its sha256 hashes (``--require-hashes --no-deps --only-binary=:all:``), into
   scratch space (``HF_SEED_PACKAGES``, an emptyDir): a wheel that differs from the lock is
   refused.
2. ``hf_hub_download`` fetches, at the revision the script loads (``main``), the files that
   transformers 4.44.0 (the sample's pin) reads for the script's
   ``BertForPreTraining.from_pretrained(HF_MODEL)``, into ``$HF_HOME/hub`` in the layout that
   transformers reads offline (``HF_HUB_OFFLINE=1``): the same huggingface-hub 0.24.5 writes it
   here and reads it there.

Which files, from transformers 4.44.0 ``modeling_utils.py`` (``PreTrainedModel.from_pretrained``)
with ``safetensors`` installed (a transformers 4.44.0 dependency) and no variant:
``config.json`` (``CONFIG_NAME``, read first for the configuration and commit hash); then the
first weights file that exists of ``model.safetensors``, ``model.safetensors.index.json`` (and
its shards), ``pytorch_model.bin``, ``pytorch_model.bin.index.json`` (and its shards). No
``generation_config.json``: ``BertForPreTraining`` overrides neither
``prepare_inputs_for_generation`` nor ``generate``, so ``can_generate()`` is false. With PEFT
installed transformers also looks for ``adapter_config.json``, tolerating its absence (offline
too), so it is not fetched.

The step also writes the cache-version marker ``hub/version.txt`` (``1``) that transformers
4.44.0 writes at import (``utils/hub.py``, ``cache_version_file``): without it every training
process would, at ``import transformers``, warn that offline loads "will fail", scan the cache
for the pre-4.22 layout and race to write the marker on the shared file system.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REQUIREMENTS_FILE = "hf-seed-requirements.lock"
"""The hash-pinned requirements of step 1, beside this file."""
CACHE_VERSION = ("version.txt", "1")
"""transformers 4.44.0's marker of the current cache layout, in ``HF_HUB_CACHE``."""
REVISION = "main"
"""The revision ``from_pretrained`` loads by default (transformers 4.44.0)."""
CONFIG_NAME = "config.json"
WEIGHTS_ORDER: tuple[tuple[str, bool], ...] = (
    ("model.safetensors", False),
    ("model.safetensors.index.json", True),
    ("pytorch_model.bin", False),
    ("pytorch_model.bin.index.json", True),
)
"""Weights files in the order transformers 4.44.0 tries them; ``True``: a shard index."""
PYPI = "https://pypi.org/simple/"

Download = Callable[[str, str], str]
"""``(repo_id, filename) -> local path``; raises the not-found error for a missing file."""


def pip_install_command(requirements: str, target: str) -> list[str]:
    """The pip command of step 1: only the locked wheels, each hash-checked, nothing else."""
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--no-input",
        "--index-url",
        PYPI,
        "--require-hashes",
        "--no-deps",
        "--only-binary=:all:",
        "--target",
        target,
        "-r",
        requirements,
    ]


def seed(model: str, download: Download, not_found: type[Exception]) -> list[str]:
    """Download what ``from_pretrained(model)`` reads; return the file names, in order."""
    fetched = [CONFIG_NAME]
    download(model, CONFIG_NAME)
    for name, is_index in WEIGHTS_ORDER:
        try:
            path = download(model, name)
        except not_found:
            continue
        fetched.append(name)
        if is_index:
            weight_map = json.loads(Path(path).read_text(encoding="utf-8"))["weight_map"]
            for shard in sorted(set(weight_map.values())):
                download(model, shard)
                fetched.append(shard)
        return fetched
    raise SystemExit(
        f"hf-cache: {model}@{REVISION} has none of {[n for n, _ in WEIGHTS_ORDER]}: "
        "nothing that from_pretrained could load"
    )


def main() -> int:
    model = os.environ["HF_MODEL"]
    packages = os.environ["HF_SEED_PACKAGES"]
    requirements = str(Path(__file__).with_name(REQUIREMENTS_FILE))  # the ConfigMap's
    subprocess.run(pip_install_command(requirements, packages), check=True)
    sys.path.insert(0, packages)
    from huggingface_hub import hf_hub_download

    # 0.24.5 exports it here (utils/__init__.py); the release mypy sees here moved it to
    # huggingface_hub.errors.
    from huggingface_hub.utils import EntryNotFoundError  # type: ignore[attr-defined]

    def download(repo_id: str, filename: str) -> str:
        path: str = hf_hub_download(repo_id, filename, revision=REVISION)
        print(f"hf-cache: {repo_id}/{filename} -> {path}", flush=True)
        return path

    files = seed(model, download, EntryNotFoundError)
    from huggingface_hub.constants import HF_HUB_CACHE

    marker = Path(HF_HUB_CACHE, CACHE_VERSION[0])
    if not marker.is_file():
        marker.write_text(CACHE_VERSION[1], encoding="utf-8")
    print(f"hf-cache: seeded {model}@{REVISION} in {os.environ['HF_HOME']}: {files}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
