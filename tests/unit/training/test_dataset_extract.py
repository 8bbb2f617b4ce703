"""The dataset Job's extract step (ml_platform/training/dataset_extract.py) on real tarballs:
digest check, safe extraction into its own folder, all or nothing, idempotent."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from ml_platform.k8s_charts.workloads_dataset import tools_files
from ml_platform.training.dataset_extract import prepare

NAME = "bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128"


def _tarball(path: Path, members: dict[str, bytes], *, link: str | None = None) -> str:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link)
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            tar.addfile(info)
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def layout(tmp_path):
    staging, datasets = tmp_path / ".staging", tmp_path / "datasets"
    staging.mkdir()
    datasets.mkdir()
    return staging / f"{NAME}.tar", datasets, staging / f"{NAME}.done"


def _run(tarball, datasets, marker, expected=""):
    return prepare(
        tarball=str(tarball),
        expected_sha256=expected,
        datasets_dir=str(datasets),
        name=NAME,
        marker=str(marker),
    )


SHARDS = {f"{NAME}/wiki_{i}_training_{i}.hdf5": bytes([i]) * 100 for i in range(3)}


def test_a_matching_digest_unpacks_into_its_own_folder(layout, capsys):
    tarball, datasets, marker = layout
    digest = _tarball(tarball, SHARDS)
    assert _run(tarball, datasets, marker, digest) == 0
    assert sorted(p.name for p in (datasets / NAME).iterdir()) == sorted(
        Path(n).name for n in SHARDS
    )
    assert sorted(p.name for p in datasets.iterdir()) == [NAME]  # no .partial left
    assert marker.read_text().strip() == digest and not tarball.exists()
    assert "matches training.dataset_sha256" in capsys.readouterr().out
    assert _run(tarball, datasets, marker, digest) == 0  # again: the marker says done
    assert "already extracted" in capsys.readouterr().out


def test_another_digest_is_refused_and_the_download_dropped(layout, capsys):
    tarball, datasets, marker = layout
    digest = _tarball(tarball, SHARDS)
    assert _run(tarball, datasets, marker, "0" * 64) == 1
    err = capsys.readouterr().err
    assert f"SHA-256 {digest}, expected {'0' * 64} (training.dataset_sha256)" in err
    assert not tarball.exists() and not marker.exists() and not list(datasets.iterdir())


def test_without_a_pinned_digest_it_warns_with_the_digest(layout, capsys):
    tarball, datasets, marker = layout
    digest = _tarball(tarball, SHARDS)
    assert _run(tarball, datasets, marker) == 0
    assert (
        f"is not verified: training.dataset_sha256 is not set. Its SHA-256 is {digest}"
        in capsys.readouterr().out
    )


def test_unsafe_members_are_refused_before_anything_lands(layout, capsys):
    tarball, datasets, marker = layout
    digest = _tarball(tarball, SHARDS, link=f"{NAME}/passwd")
    assert _run(tarball, datasets, marker, digest) == 1
    err = capsys.readouterr().err
    assert "refusing to unpack" in err and "is a symbolic link" in err
    assert not list(datasets.iterdir()) and not marker.exists()


def test_the_wrong_top_folder_is_refused(layout, capsys):
    tarball, datasets, marker = layout
    digest = _tarball(tarball, {"other/wiki_training_0.hdf5": b"x"})
    assert _run(tarball, datasets, marker, digest) == 1
    assert f"expected the folder {NAME!r} at its root, found ['other']" in capsys.readouterr().err
    assert not list(datasets.iterdir())


def test_an_interrupted_extraction_starts_again(layout):
    tarball, datasets, marker = layout
    digest = _tarball(tarball, SHARDS)
    stale = datasets / f".{NAME}.partial" / NAME
    stale.mkdir(parents=True)
    (stale / "wiki_0_training_0.hdf5").write_bytes(b"half")  # O_EXCL would refuse it
    assert _run(tarball, datasets, marker, digest) == 0
    assert (datasets / NAME / "wiki_0_training_0.hdf5").read_bytes() == bytes([0]) * 100


def test_the_configmap_files_run_as_the_pod_runs_them(layout, tmp_path):
    """python3 -I on the two files of the ConfigMap, nothing else on the path."""
    tarball, datasets, marker = layout
    digest = _tarball(tarball, SHARDS)
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, text in tools_files().items():
        (tools / name).write_text(text)
    env = {
        "TARBALL": str(tarball),
        "DATASET_SHA256": digest,
        "DATASETS_DIR": str(datasets),
        "DATASET_NAME": NAME,
        "DONE_MARKER": str(marker),
    }
    proc = subprocess.run(
        [sys.executable, "-I", str(tools / "dataset_extract.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"dataset ready: {datasets / NAME}" in proc.stdout
