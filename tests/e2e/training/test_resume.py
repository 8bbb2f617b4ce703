"""What the emitted training command does before torchrun, run with bash on CPU: the
locked-memory check, the resume check (no checkpoint starts fresh; a checkpoint resumes with
the script's --resume_ckpt) and the Neuron root communicator on the first pod's name and the
reserved port.

This machine's locked-memory limit is not unlimited (and cannot be raised here), as on a node
whose containerd kept its default. A Trainium node of the platform gives ``unlimited`` (its
launch template's user data); :data:`UNLIMITED_MEMLOCK` stands in for that, as a bash function
that shadows the ``ulimit`` builtin (bash imports exported functions from its environment)."""

from __future__ import annotations

import json
import os
import random
import stat
import subprocess
import sys
from pathlib import Path

from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _NodeDesc

from ml_platform.training.component import BOOTSTRAP_PORT
from ml_platform.training.jobs import BERT_DATA_DIR, BERT_OUTPUT_DIR

FIRST_POD = "bert-pretrain-worker-0-0.bert-pretrain"
UNLIMITED_MEMLOCK = {"BASH_FUNC_ulimit%%": "() { echo unlimited; }"}


def _run(line: str, tmp_path: Path, env: dict[str, str], *, node_memlock: bool = True) -> dict:
    """Run ``line`` with bash, ``python3`` on PATH being a stand-in that records its argv,
    environment and parent process, so what torchrun would have received is visible.
    ``node_memlock``: ``ulimit -l`` answers ``unlimited`` as on a Trainium node of the
    platform; False: this machine's real limit."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    record = tmp_path / "launched.json"
    fake = bin_dir / "python3"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'ppid': os.getppid(),"
        f" 'root_comm': os.environ.get('NEURON_RT_ROOT_COMM_ID')}}, open({str(record)!r}, 'w'))\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    proc = subprocess.run(
        ["bash", "-c", line],
        env={
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            **(UNLIMITED_MEMLOCK if node_memlock else {}),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=30,
    )
    if not record.exists():
        return {"code": proc.returncode, "stderr": proc.stderr, "stdout": proc.stdout}
    launched = json.loads(record.read_text())
    launched["stdout"] = proc.stdout
    return launched


def _pretrain_line(
    volcano_jobs, task: int, output_dir: Path, shards: int = 64, job: str = "bert-pretrain"
) -> str:
    """The job's command line with /data/output and the dataset folder moved under the test's
    folder; the dataset folder holds ``shards`` (empty) shard files."""
    (container,) = volcano_jobs[job]["spec"]["tasks"][task]["template"]["spec"]["containers"]
    line = container["command"][2]
    data = output_dir.parent / "dataset"
    data.mkdir(exist_ok=True)
    for i in range(shards):
        (data / f"wikicorpus_en_training_{i}.hdf5").write_bytes(b"")
    (data / "wikicorpus_en_test_0.hdf5").write_bytes(b"")  # not a training shard
    assert line.count(BERT_DATA_DIR) == 3  # the shard count, its message and --data_dir
    if job == "bert-pretrain":
        assert line.count(BERT_OUTPUT_DIR) == 3  # the check, its message and --output_dir
    return line.replace(BERT_DATA_DIR, str(data)).replace(BERT_OUTPUT_DIR, str(output_dir))


def test_no_checkpoint_starts_fresh(volcano_jobs, tmp_path):
    out = tmp_path / "output"
    out.mkdir()
    launched = _run(
        _pretrain_line(volcano_jobs, 1, out), tmp_path, {"VC_WORKER_0_HOSTS": FIRST_POD}
    )
    argv = launched["argv"]
    assert argv[:3] == ["-m", "torch.distributed.run", "--rdzv_backend"]
    assert argv[-2:] == ["--output_dir", str(out)] and "--resume_ckpt" not in argv
    assert "resuming" not in launched["stdout"]
    # exec'd: the launcher's parent is this test, not a bash left in between (SIGTERM
    # from the kubelet reaches torchrun).
    assert launched["ppid"] == os.getpid()


def test_a_checkpoint_resumes_from_it(volcano_jobs, tmp_path):
    out = tmp_path / "output"
    out.mkdir()
    (out / "ckpt_1200.pt").write_bytes(b"")  # as the script names them: ckpt_<step>.pt
    (out / "ckpt_600.pt").write_bytes(b"")
    for task in (0, 1):  # every pod decides alike
        launched = _run(
            _pretrain_line(volcano_jobs, task, out), tmp_path, {"VC_WORKER_0_HOSTS": FIRST_POD}
        )
        # The script picks the newest ckpt_<step>.pt in --output_dir itself.
        assert launched["argv"][-3:] == ["--output_dir", str(out), "--resume_ckpt"]
        assert f"resuming from the newest checkpoint in {out}" in launched["stdout"]


def test_other_files_are_not_checkpoints(volcano_jobs, tmp_path):
    out = tmp_path / "output"
    (out / "neuron_tblogs_x").mkdir(parents=True)
    (out / "ckpt_notes.txt").write_text("")
    launched = _run(_pretrain_line(volcano_jobs, 0, out), tmp_path, {})
    assert "--resume_ckpt" not in launched["argv"]


def test_precompile_never_resumes(volcano_jobs, tmp_path):
    (container,) = volcano_jobs["bert-precompile"]["spec"]["tasks"][0]["template"]["spec"][
        "containers"
    ]
    assert "--resume_ckpt" not in container["command"][2]
    assert "ckpt_" not in container["command"][2]


def test_root_communicator_is_the_first_pods_name_on_the_reserved_port(volcano_jobs, tmp_path):
    out = tmp_path / "output"
    out.mkdir()
    for task in (0, 1):  # the first pod's own value too: its name, never localhost
        launched = _run(
            _pretrain_line(volcano_jobs, task, out), tmp_path, {"VC_WORKER_0_HOSTS": FIRST_POD}
        )
        assert launched["root_comm"] == f"{FIRST_POD}:{BOOTSTRAP_PORT}"


def test_the_first_pod_hosts_global_rank_0():
    """torchrun's c10d rendezvous numbers nodes in the sorted order of their descriptors
    (FQDN first): the first pod's name sorts first for any job size, whatever the pids."""
    for nodes in (2, 11, 64):
        descs = [
            _NodeDesc(
                f"bert-pretrain-worker-{i}-0.bert-pretrain.training.svc.cluster.local",
                random.randint(1, 2**22),
                0,
            )
            for i in range(nodes)
        ]
        random.shuffle(descs)
        assert sorted(descs)[0].addr.startswith(FIRST_POD + ".")


def test_too_few_shards_fail_the_pod_at_once_with_a_clear_message(volcano_jobs, tmp_path):
    """The script asserts world_size <= num_files only after the rendezvous and the model
    load; the pod checks first. 2 nodes x 32 workers need 64 shards."""
    out = tmp_path / "output"
    out.mkdir()
    for job in ("bert-pretrain", "bert-precompile"):
        result = _run(_pretrain_line(volcano_jobs, 0, out, shards=63, job=job), tmp_path, {})
        assert result["code"] == 1 and "argv" not in result  # the launcher never started
        assert (
            "holds 63 dataset shards (*_training_*.hdf5), fewer than the 64 workers of "
            "this job: the training script needs at least one shard per worker" in result["stderr"]
        )
    launched = _run(_pretrain_line(volcano_jobs, 0, out, shards=64), tmp_path, {})
    assert launched["argv"][:2] == ["-m", "torch.distributed.run"]


def test_a_limited_locked_memory_stops_the_pod_at_once_with_a_clear_message(volcano_jobs, tmp_path):
    """Observed: this machine's real ``ulimit -l`` (a number of KiB, as under containerd's
    default) stops every training command before torchrun, naming the limit and the fix."""
    limit = subprocess.run(
        ["bash", "-c", "ulimit -l"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert limit != "unlimited", "this check needs a limited machine; run it unprivileged"
    out = tmp_path / "output"
    out.mkdir()
    for job in ("bert-pretrain", "bert-precompile"):
        result = _run(_pretrain_line(volcano_jobs, 0, out, job=job), tmp_path, {},
                      node_memlock=False)  # fmt: skip
        assert result["code"] == 1 and "argv" not in result  # the launcher never started
        assert (
            f"ERROR: the locked-memory limit of this container (ulimit -l) is {limit} KiB, "
            "not unlimited: EFA pins memory" in result["stderr"]
        )
        assert "LimitMEMLOCK=infinity" in result["stderr"]
    launched = _run(_pretrain_line(volcano_jobs, 0, out), tmp_path, {})
    assert launched["argv"][:2] == ["-m", "torch.distributed.run"]
