"""The dataset Job's hf-cache step (ml_platform/training/hf_seed.py) as shipped in the tools
ConfigMap, and its hash-pinned requirements.

Observed here: the script from the ConfigMap runs (in this interpreter, from a folder laid
out as the pod's ``/opt/dataset-tools``), builds the pip command and imports
``huggingface_hub`` from the pip target folder, where a fake package records each download;
the lock's pins and hashes are compared with sample-requirements.lock. Taken from sources:
which files transformers 4.44.0 reads (its ``modeling_utils.py``, cited in hf_seed.py), the
Requires-Dist of huggingface-hub 0.24.5 and requests 2.31.0, and the wheel hashes pip picks on
CPython 3.12 x86_64 (both observed once with a real ``pip download --require-hashes`` from
PyPI: 12 wheels, 2.1 MB; too networky for every run). Once by hand against a local stand-in
for the Hub (HF_ENDPOINT): the old step (transformers 4.44.0 ``from_pretrained``) and this one
requested the same two files and left the same cache tree, which transformers 4.44.0 then
loaded with HF_HUB_OFFLINE=1 and no request.
"""

from __future__ import annotations

import json
import re
import runpy
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from ml_platform.k8s_charts.workloads_dataset import HF_SEED_PACKAGES, tools_files
from ml_platform.training import hf_seed
from tests.unit.training.test_training_image import lock_entries

LOCK = Path(hf_seed.__file__).with_name(hf_seed.REQUIREMENTS_FILE)
SAMPLE_LOCK = Path(hf_seed.__file__).with_name("sample-requirements.lock")

FAKE_HUB = """\
import json, os
from pathlib import Path

CALLS = []


def hf_hub_download(repo_id, filename, *, revision=None, **kwargs):
    CALLS.append((repo_id, filename, revision, kwargs))
    files = json.loads(os.environ["FAKE_HUB_FILES"])
    if filename not in files:
        from huggingface_hub.utils import EntryNotFoundError

        raise EntryNotFoundError(f"404 {filename}")
    path = Path(os.environ["HF_HOME"], "hub", repo_id, filename)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(files[filename])
    return str(path)
"""
FAKE_UTILS = "class EntryNotFoundError(OSError):\n    pass\n"
FAKE_CONSTANTS = "import os\n\nHF_HUB_CACHE = os.path.join(os.environ['HF_HOME'], 'hub')\n"

# bert-large-uncased's files on the Hub: not verified from a source here (the model card does
# not list them); the step does not depend on the list, only on which of the names it asks for
# exist. Each case below gives the Hub's answer for one layout.
HUB_SINGLE = {
    "config.json": "{}",
    "model.safetensors": "w",
    "pytorch_model.bin": "w",
    "tf_model.h5": "w",
    "vocab.txt": "v",
    "tokenizer.json": "t",
}


def _forget_huggingface_hub() -> dict[str, Any]:
    found = {m: sys.modules[m] for m in list(sys.modules) if m.split(".")[0] == "huggingface_hub"}
    for name in found:
        del sys.modules[name]
    return found


@pytest.fixture(autouse=True)
def _restore_huggingface_hub():
    """Whatever the step imported leaves with the test; the venv's own modules come back."""
    before = {m: v for m, v in sys.modules.items() if m.split(".")[0] == "huggingface_hub"}
    yield
    _forget_huggingface_hub()
    sys.modules.update(before)


def _run_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub_files: dict[str, str]
) -> tuple[list[list[str]], list[tuple[Any, ...]], str]:
    """Runs hf_seed.py from a copy of the ConfigMap; returns pip commands, downloads, output."""
    tools = tmp_path / "opt-dataset-tools"
    tools.mkdir(parents=True)
    for name, text in tools_files().items():
        (tools / name).write_text(text)
    packages = tmp_path / "hf-seed-packages"  # what pip --target would fill
    (packages / "huggingface_hub").mkdir(parents=True)
    (packages / "huggingface_hub" / "__init__.py").write_text(FAKE_HUB)
    (packages / "huggingface_hub" / "utils.py").write_text(FAKE_UTILS)
    (packages / "huggingface_hub" / "constants.py").write_text(FAKE_CONSTANTS)
    monkeypatch.setenv("HF_MODEL", "bert-large-uncased")
    monkeypatch.setenv("HF_SEED_PACKAGES", str(packages))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("FAKE_HUB_FILES", json.dumps(hub_files))
    monkeypatch.setattr(sys, "path", list(sys.path))
    _forget_huggingface_hub()  # this venv's own release must not answer the import
    pip_runs: list[list[str]] = []

    def fake_run(cmd: list[str], check: bool) -> None:
        assert check is True
        pip_runs.append(cmd)

    import subprocess

    monkeypatch.setattr(subprocess, "run", fake_run)
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(str(tools / "hf_seed.py"), run_name="__main__")
    assert exited.value.code == 0
    hub = sys.modules["huggingface_hub"]
    assert hub.__file__ == str(packages / "huggingface_hub" / "__init__.py")
    return pip_runs, hub.CALLS, str(tools)


def test_the_shipped_script_compiles():
    compile(tools_files()["hf_seed.py"], "hf_seed.py", "exec")


def test_installs_only_the_locked_wheels_hash_checked_into_scratch_space(
    tmp_path, monkeypatch, capsys
):
    (pip,), _, tools = _run_step(tmp_path, monkeypatch, HUB_SINGLE)
    assert pip[:4] == [sys.executable, "-m", "pip", "install"]
    assert {"--require-hashes", "--no-deps", "--only-binary=:all:", "--no-cache-dir"} <= set(pip)
    assert pip[pip.index("--index-url") + 1] == "https://pypi.org/simple/"
    assert pip[pip.index("--target") + 1] == str(tmp_path / "hf-seed-packages")
    # The requirements are the lock from the same ConfigMap, beside the script.
    assert pip[pip.index("-r") + 1] == f"{tools}/hf-seed-requirements.lock"
    assert Path(tools, "hf-seed-requirements.lock").read_text() == LOCK.read_text()
    # In the pod the target is scratch space under /tmp (the emptyDir).
    assert HF_SEED_PACKAGES.startswith("/tmp/")


def test_downloads_exactly_what_from_pretrained_reads(tmp_path, monkeypatch, capsys):
    """Issue 32: the step ran ``BertForPreTraining.from_pretrained`` in the training image;
    it now fetches the same files with huggingface-hub: config.json and the first weights
    file transformers 4.44.0 tries that exists (model.safetensors), at ``main``. Nothing
    else of the repository (TF, tokenizer, the second weights format)."""
    _, calls, _ = _run_step(tmp_path, monkeypatch, HUB_SINGLE)
    assert calls == [
        ("bert-large-uncased", "config.json", "main", {}),
        ("bert-large-uncased", "model.safetensors", "main", {}),
    ]
    assert "seeded bert-large-uncased@main" in capsys.readouterr().out
    # transformers 4.44.0's cache-layout marker, as its own import writes it.
    assert (tmp_path / "hf_home" / "hub" / "version.txt").read_text() == "1"


def test_falls_back_as_transformers_does(tmp_path, monkeypatch):
    """No safetensors: the index is tried next, then pytorch_model.bin (transformers 4.44.0's
    order); a sharded checkpoint brings its shards."""
    _, calls, _ = _run_step(
        tmp_path / "bin", monkeypatch, {"config.json": "{}", "pytorch_model.bin": "w"}
    )
    assert [c[1] for c in calls] == [
        "config.json",
        "model.safetensors",
        "model.safetensors.index.json",
        "pytorch_model.bin",
    ]
    index = {"weight_map": {"a": "model-00002.safetensors", "b": "model-00001.safetensors"}}
    shards = {
        "config.json": "{}",
        "model.safetensors.index.json": json.dumps(index),
        "model-00001.safetensors": "w",
        "model-00002.safetensors": "w",
    }
    _, calls, _ = _run_step(tmp_path / "sharded", monkeypatch, shards)
    assert [c[1] for c in calls] == [
        "config.json",
        "model.safetensors",
        "model.safetensors.index.json",
        "model-00001.safetensors",
        "model-00002.safetensors",
    ]


def test_no_weights_is_a_clear_failure():
    def download(repo: str, name: str) -> str:
        if name != "config.json":
            raise KeyError(name)
        return "/x"

    with pytest.raises(SystemExit, match=r"bert-large-uncased@main has none of .*model\.safe"):
        hf_seed.seed("bert-large-uncased", download, KeyError)


# Requires-Dist (no extras, non-Windows) of the two packages the step needs, from the wheels'
# METADATA (huggingface_hub-0.24.5.dist-info, requests-2.31.0.dist-info); the other ten have
# none on Linux.
REQUIRES = {
    "huggingface-hub": [
        "filelock",
        "fsspec>=2023.5.0",
        "packaging>=20.9",
        "pyyaml>=5.1",
        "requests",
        "tqdm>=4.42.1",
        "typing-extensions>=3.7.4.3",
    ],
    "requests": ["charset-normalizer<4,>=2", "idna<4,>=2.5", "urllib3<3,>=1.21.1", "certifi"],
}


def test_lock_is_huggingface_hub_and_exactly_its_dependencies():
    entries = lock_entries(LOCK)
    wanted = {"huggingface-hub"} | {Requirement(r).name for rs in REQUIRES.values() for r in rs}
    assert set(entries) == wanted and len(entries) == 12
    for requirements in REQUIRES.values():
        for text in requirements:
            req = Requirement(text)
            assert req.specifier.contains(entries[req.name][0]), (text, entries[req.name][0])
    for name, (version, hashes) in entries.items():
        assert re.fullmatch(r"[0-9]+(\.[0-9]+)+", version), (name, version)
        assert hashes, name


def test_lock_shares_the_samples_pins_and_hashes():
    """The step installs the huggingface-hub the training image has (the sample's pin), so the
    cache is written by the same release that reads it offline."""
    ours, sample = lock_entries(LOCK), lock_entries(SAMPLE_LOCK)
    assert ours["huggingface-hub"] == sample["huggingface-hub"]
    assert ours["huggingface-hub"][0] == "0.24.5"
    assert ours["requests"] == sample["requests"]


def test_lock_has_the_wheels_pip_picks_on_cpython_312_x86_64():
    """Observed with ``pip download --require-hashes --no-deps --only-binary=:all:
    --platform manylinux_2_17_x86_64 --python-version 3.12 -r hf-seed-requirements.lock``
    from PyPI: the two compiled wheels pip picks, sha256 of the downloaded files."""
    entries = lock_entries(LOCK)
    picked = {
        "pyyaml": "80bab7bfc629882493af4aa31a4cfa43a4c57c83813253626916b8c7ada83476",
        "charset-normalizer": "4e594135de17ab3866138f496755f302b72157d115086d100c3f19370839dd3a",
        "huggingface-hub": "d93fb63b1f1a919a22ce91a14518974e81fc4610bf344dfe7572343ce8d3aced",
    }
    for name, digest in picked.items():
        assert digest in entries[name][1], name
