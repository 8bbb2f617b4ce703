"""The emitted rendezvous, run for real: torchrun on CPU with the manifest's own command line.

Each "node" is the shell command and environment of one task of the rendered pretraining
Volcano Job, changed only where a laptop differs from a Trainium node:

* the training script becomes a tiny gloo ``all_reduce`` script written by the test, and
  ``--nproc_per_node`` becomes 1 (2 nodes x 1 = world size 2: each node's agent and its one
  worker import torch, the run's main cost, so every extra local rank costs CPU and shows
  nothing new about the rendezvous across nodes);
* Volcano's ``svc`` plugin env vars (``VC_<TASK>_HOSTS``, one DNS name per task, as its
  GenerateHosts makes them) are added to every node, with each name resolved to 127.0.0.1
  (the job's headless Service does that on the cluster);
* the rendezvous port becomes a free one, so parallel test runs cannot collide;
* the dataset folder becomes a test folder holding as many (empty) shard files as the job has
  workers, which the command counts before it starts torchrun;
* ``ulimit -l`` answers ``unlimited``, as the Trainium nodes' containerd gives it (this
  machine's limit cannot be raised; test_resume.py runs the check against the real one).

The same runs once for the job rendered for one trn2.48xlarge node (64 workers there, 2 here),
so Trn2's command line executes too and its workers' LNC and compiler settings are checked
(about 8 s: one agent and two workers import torch).

On one machine both agents see a loopback address and either may host the c10d store (torch
falls back to a client when the port is taken); on the cluster only the first pod's name is
its own. Everything else (backend, run id, node count, env, bash expansion) is the manifest's.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ml_platform.training.jobs import BERT_DATA_DIR, BERT_SCRIPT
from tests.e2e.training.test_resume import UNLIMITED_MEMLOCK

NPROC = 1
WORLD = 2 * NPROC  # two nodes (the rendered job's two tasks' pods)
TIMEOUT_S = 120  # per phase: a run costs ~13 s of CPU (4 torch imports); slower when loaded

GLOO_SCRIPT = """\
import json, os, sys, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
out = os.path.join(os.environ["RDZV_TEST_OUT"], f"rank-{rank}.json")
with open(out + ".tmp", "w") as f:
    json.dump({"rank": rank, "world": world, "sum": total.item(), "pid": os.getpid(),
               "lnc": os.environ.get("NEURON_LOGICAL_NC_CONFIG"),
               "cc_flags": os.environ.get("NEURON_CC_FLAGS")}, f)
os.replace(out + ".tmp", out)
if os.environ.get("RDZV_TEST_HOLD"):  # stay "mid-run" until killed
    time.sleep(TIMEOUT)
dist.barrier()
dist.destroy_process_group()
""".replace("TIMEOUT", str(TIMEOUT_S))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env_key(task_name: str) -> str:
    return task_name.replace("-", "_").upper()


def volcano_svc_env(job: dict[str, Any]) -> dict[str, str]:
    """The host env vars Volcano's svc plugin gives every pod of ``job``: per task
    ``VC_<TASK>_HOSTS`` (``<job>-<task>-<i>.<job>``, comma separated) and ``VC_<TASK>_NUM``.
    Source: https://github.com/volcano-sh/volcano/blob/v1.15.1/pkg/controller/job/plugins/svc/svc.go
    """
    name = job["metadata"]["name"]
    env: dict[str, str] = {}
    if "svc" not in job["spec"].get("plugins", {}):
        return env  # without the plugin, pods get neither the variables nor the DNS names
    for task in job["spec"]["tasks"]:
        hosts = [f"{name}-{task['name']}-{i}.{name}" for i in range(task["replicas"])]
        env[f"VC_{_env_key(task['name'])}_HOSTS"] = ",".join(hosts)
        env[f"VC_{_env_key(task['name'])}_NUM"] = str(len(hosts))
    return env


@dataclass
class Node:
    """One task of the Volcano Job, ready to run here."""

    command: list[str]
    env: dict[str, str]


def local_nodes(
    job: dict[str, Any], *, script: Path, port: int, data_dir: Path, nproc: int = NPROC
) -> list[Node]:
    """Every task's container command and env, localized as the module docstring says
    (``nproc`` workers per node)."""
    svc = volcano_svc_env(job)
    resolved = {k: re.sub(r"[^,]+", "127.0.0.1", v) if k.endswith("_HOSTS") else v
                for k, v in svc.items()}  # fmt: skip
    nodes = []
    for task in job["spec"]["tasks"]:
        (container,) = task["template"]["spec"]["containers"]
        argv = [*container.get("command", []), *container.get("args", [])]
        assert argv[:2] == ["bash", "-c"] and len(argv) == 3, argv
        line = argv[2]
        script_arg = rf"(?<= ){re.escape(BERT_SCRIPT)}(?= )"
        line, n_script = re.subn(script_arg, shlex.quote(str(script)), line)
        line, n_nproc = re.subn(r"--nproc_per_node \d+", f"--nproc_per_node {nproc}", line)
        line, n_port = re.subn(r"(--rdzv_endpoint \S+:)\d+", rf"\g<1>{port}", line)
        assert (n_script, n_nproc, n_port) == (1, 1, 1), line
        assert line.count(BERT_DATA_DIR) == 3, line  # shard count, its message, --data_dir
        line = line.replace(BERT_DATA_DIR, str(data_dir))
        env = {e["name"]: e["value"] for e in container.get("env", [])}
        nodes.append(
            Node(command=["bash", "-c", line], env={**env, **resolved, **UNLIMITED_MEMLOCK})
        )
    return nodes


class Cluster:
    """Runs the nodes as process groups (one per pod) and cleans up after itself."""

    def __init__(self, nodes: list[Node], workdir: Path) -> None:
        self.nodes = nodes
        self.workdir = workdir
        self.procs: list[subprocess.Popen] = []
        self.attempt = 0

    def start(self, *, hold: bool = False) -> Path:
        """Start every node (a new attempt); return the folder the ranks report into."""
        self.attempt += 1
        out = self.workdir / f"attempt-{self.attempt}"
        out.mkdir()
        base = {k: v for k, v in os.environ.items() if not k.startswith(("VC_", "TORCHX_"))}
        # `python3` of the command is this venv's interpreter (torch is installed here).
        base["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{base.get('PATH', '')}"
        base["RDZV_TEST_OUT"] = str(out)
        if hold:
            base["RDZV_TEST_HOLD"] = "1"
        self.procs = []
        for i, node in enumerate(self.nodes):
            with (
                (out / f"node-{i}.out").open("w") as stdout,
                (out / f"node-{i}.err").open("w") as stderr,
            ):
                self.procs.append(
                    subprocess.Popen(
                        node.command,
                        env={**base, **node.env},
                        stdout=stdout,
                        stderr=stderr,
                        start_new_session=True,  # one process group per "pod"
                    )
                )
        return out

    def wait(self, timeout: float = TIMEOUT_S) -> list[int]:
        deadline = time.monotonic() + timeout
        codes = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                self.kill()
                pytest.fail(f"attempt {self.attempt}: nodes still running after {timeout} s")
        return codes

    def wait_any(self, timeout: float = TIMEOUT_S) -> int:
        """Index of the first node to exit."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, proc in enumerate(self.procs):
                if proc.poll() is not None:
                    return i
            time.sleep(0.1)
        self.kill()
        pytest.fail(f"attempt {self.attempt}: no node exited within {timeout} s")

    def kill(self, sig: int = signal.SIGKILL, grace: float = 10) -> None:
        """Signal every node's process group; SIGKILL what is left after ``grace`` s."""
        for proc in self.procs:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
        for proc in self.procs:
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
            try:  # workers of a group outlive a dead agent: clean the whole group
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()

    def stderr(self) -> str:
        out = self.workdir / f"attempt-{self.attempt}"
        return "".join(p.read_text() for p in sorted(out.glob("node-*.err")))


def _ranks(out: Path, *, expected: int = WORLD, timeout: float = TIMEOUT_S) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(list(out.glob("rank-*.json"))) < expected:
        time.sleep(0.1)
    return sorted((json.loads(p.read_text()) for p in out.glob("rank-*.json")),
                  key=lambda r: r["rank"])  # fmt: skip


def _assert_group_formed(out: Path, cluster: Cluster) -> None:
    ranks = _ranks(out)
    assert [(r["rank"], r["world"], r["sum"]) for r in ranks] == [
        (rank, WORLD, WORLD * (WORLD + 1) / 2) for rank in range(WORLD)
    ], cluster.stderr()[-4000:]


def _script_and_shards(tmp_path: Path, shards: int) -> tuple[Path, Path]:
    """The all-reduce script the pods run, and a dataset folder of ``shards`` empty shards
    named as the BERT script globs them."""
    script = tmp_path / "gloo_all_reduce.py"
    script.write_text(GLOO_SCRIPT)
    data_dir = tmp_path / "dataset"
    data_dir.mkdir()
    for i in range(shards):
        (data_dir / f"wikicorpus_en_training_{i}.hdf5").write_bytes(b"")
    return script, data_dir


@pytest.fixture
def cluster(volcano_jobs, tmp_path: Path) -> Iterator[Cluster]:
    # One shard per worker of the rendered job (2 nodes x 32).
    script, data_dir = _script_and_shards(tmp_path, 64)
    nodes = local_nodes(
        volcano_jobs["bert-pretrain"], script=script, port=_free_port(), data_dir=data_dir
    )
    running = Cluster(nodes, tmp_path)
    yield running
    running.kill()


def test_volcano_gives_the_rendezvous_host_to_every_pod(volcano_jobs):
    """The endpoint names an env var the pod has: its own (first pod) or the svc plugin's."""
    job = volcano_jobs["bert-pretrain"]
    svc = volcano_svc_env(job)
    assert svc["VC_WORKER_0_HOSTS"] == "bert-pretrain-worker-0-0.bert-pretrain"
    # DNS answers for a pod before it is ready, so the others find the store while it starts.
    assert job["spec"]["plugins"]["svc"] == ["--publish-not-ready-addresses"]
    for i, task in enumerate(job["spec"]["tasks"]):
        (container,) = task["template"]["spec"]["containers"]
        line = container["command"][2]
        host_var = re.search(r"--rdzv_endpoint \$\{(\w+):=localhost\}:29500 ", line)
        assert host_var is not None, container["command"]
        env = {e["name"]: e["value"] for e in container["env"]}
        if i == 0:
            assert env[host_var.group(1)] == "localhost"  # the first pod hosts the store
        else:
            assert host_var.group(1) == "VC_WORKER_0_HOSTS" and host_var.group(1) not in env


def test_rendezvous_forms_again_on_rerun_and_after_a_volcano_restart(cluster: Cluster):
    # First run, to the end.
    out = cluster.start()
    assert cluster.wait() == [0, 0], cluster.stderr()[-4000:]
    _assert_group_formed(out, cluster)
    assert "Traceback" not in cluster.stderr()

    # "kubectl delete -f; kubectl apply -f" of the same manifest right away: the group forms
    # again (asserted below) ...
    out = cluster.start(hold=True)
    _assert_group_formed(out, cluster)
    # ... and while it runs, a worker dies: its node's agent fails the pod ...
    victim = next(r for r in _ranks(out) if r["rank"] == WORLD - 1)
    os.kill(victim["pid"], signal.SIGKILL)
    failed = cluster.wait_any()
    assert cluster.procs[failed].returncode != 0
    # ... and Volcano's RestartJob deletes every pod (SIGTERM, then SIGKILL) and recreates them.
    cluster.kill(signal.SIGTERM)
    out = cluster.start()
    assert cluster.wait() == [0, 0], cluster.stderr()[-4000:]
    _assert_group_formed(out, cluster)
    assert "Traceback" not in cluster.stderr()


# --- Trn2: the same command line, rendered for trn2.48xlarge --------------------------------

TRN2_NPROC = 2  # of the 64 a trn2.48xlarge runs: two local ranks form a real group


@pytest.fixture(scope="module")
def trn2_single_node_job() -> dict[str, Any]:
    """The pretraining Volcano Job rendered for one trn2.48xlarge node, by the manifests' own
    code path (settings, bert_jobs, TorchX, the chart)."""
    from ml_platform.config import Settings
    from ml_platform.k8s_charts.workloads import PRETRAIN_FILE, build_workload_manifests

    settings = Settings.from_context(
        {
            "trainium": {
                "instance_type": "trn2.48xlarge",
                "nodes": 1,
                "min_nodes": 1,
                "max_nodes": 1,
            }
        }
    )
    (job,) = build_workload_manifests(settings)[PRETRAIN_FILE]
    return job


def test_the_trn2_command_line_runs_under_torchrun(trn2_single_node_job, tmp_path: Path):
    """One trn2 node's pod: its bash line (memlock and shard checks, root communicator, resume
    check, torchrun with the job's rendezvous) runs, and its workers see Trn2's LNC and
    compiler target."""
    job = trn2_single_node_job
    (task,) = job["spec"]["tasks"]
    (container,) = task["template"]["spec"]["containers"]
    assert "--nproc_per_node 64" in container["command"][2]
    assert "--grad_accum_usteps 16" in container["command"][2]  # 16,384 / (64 x 16)
    # One shard per worker of the rendered job (1 node x 64).
    script, data_dir = _script_and_shards(tmp_path, 64)
    (node,) = local_nodes(
        job, script=script, port=_free_port(), data_dir=data_dir, nproc=TRN2_NPROC
    )
    cluster = Cluster([node], tmp_path)
    try:
        out = cluster.start()
        assert cluster.wait() == [0], cluster.stderr()[-4000:]
    finally:
        cluster.kill()
    ranks = _ranks(out, expected=TRN2_NPROC)
    assert [(r["rank"], r["world"], r["sum"]) for r in ranks] == [(0, 2, 3.0), (1, 2, 3.0)]
    for r in ranks:
        assert r["lnc"] == "2"
        assert r["cc_flags"] == (
            "--cache_dir=/data/neuron_cache/bert-large_0 --target=trn2 --logical-nc-config=2"
        )
