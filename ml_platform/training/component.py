"""TorchX component: data-parallel PyTorch/XLA training on Trainium nodes.

This function is the single source of truth for a training job. The reviewed manifests
(``python -m ml_platform.k8s_charts.workloads``) are rendered from it by TorchX's own
Kubernetes scheduler, and users can submit it directly with the ``torchx`` CLI.

Run it from the repository root (TorchX imports a file that sits inside a package under
its dotted name, ``ml_platform.training.component``, and puts the repository root on
``sys.path``, so no ``PYTHONPATH`` is needed)::

    torchx run -s kubernetes --workspace "" \\
        -cfg queue=training,namespace=training \\
        ml_platform/training/component.py:trainium_ddp \\
        --name bert-pretrain --nnodes 2 --cacheset bert-large \\
        --image <account>.dkr.ecr.<region>.amazonaws.com/ml-platform/training:bert-pretrain-v1 \\
        --script dp_bert_large_hf_pretrain_hdf5.py \\
        -- --batch_size 16 --grad_accum_usteps 16 --output_dir /data/output \\
           --data_dir /data/datasets/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128

* ``-cfg`` (alias ``--scheduler_args``) takes the Volcano queue and the namespace;
  ``torchx runopts kubernetes`` lists the rest.
* ``--workspace ""`` submits the image as built by ``make image``. Without it, TorchX
  treats the current directory (or ``--workspace <dir>``) as a workspace: it copies it
  into the image's working directory in a patched image built with Docker on top of
  ``--image`` and pushes that to ``-cfg ...,image_repo=<ecr repository uri>`` (the
  tutorial's way of shipping script edits).
* Everything after ``--`` is passed to the script unchanged, one argument each.
* ``torchx run ... ml_platform/training/component.py:trainium_ddp --help`` prints the
  parameters; ``--dryrun`` prints the Volcano Job instead of submitting it; the dotted form
  ``ml_platform.training.component:trainium_ddp`` works too when the package is importable.

Keep this module free of ``from __future__ import annotations``: TorchX reads the
parameter annotations at run time to build its argument parser.
"""

__all__ = [
    "HEADROOM_SHARE",
    "component_problems",
    "node_headroom",
    "trainium_ddp",
]

import re
import shlex

import torchx.specs as specs
from torchx.specs.overlays import set_overlay

from ml_platform.instances import TRAINIUM_INSTANCES, TrainiumInstance
from ml_platform.k8s_names import (
    EFA_RESOURCE,
    FSX_CLAIM,
    FSX_MOUNT_PATH,
    INSTANCE_TYPE_LABEL,
    NEURON_RESOURCE,
    NEURON_TAINT_KEY,
)

ROLE_NAME = "worker"
"""Role (and so Volcano task) name: pods are ``<job>-worker-<replica>-0``."""

RDZV_BACKEND = "c10d"
"""torchrun's rendezvous backend: a TCPStore hosted by the agent of the first pod. It lives
and dies with that pod, so a rerun, a Volcano restart or a job longer than any TTL starts from
a fresh store; nothing outside the job holds state (the ``etcd`` backend torch calls legacy
kept a closed run id for 2 h and broke every rerun and retry)."""

RDZV_PORT = 29500
"""Port of the c10d store on the first pod (TorchX ``dist.torchrun``'s default ``rdzv_port``)."""

# Rendezvous host, exactly as TorchX's dist.torchrun builds it: bash expands the env var named
# by the `rank0_env` macro. The Kubernetes scheduler makes that TORCHX_RANK0_HOST=localhost on
# the first pod and VC_WORKER_0_HOSTS on the others, which Volcano's svc plugin fills with the
# first pod's stable DNS name `<job>-worker-0-0.<job>` (headless Service named after the Job,
# addresses published before readiness). Sources: torchx/components/dist.py (torchrun) and
# torchx/schedulers/kubernetes_scheduler.py (app_to_resource);
# https://github.com/volcano-sh/volcano/blob/v1.15.1/pkg/controller/job/plugins/svc/svc.go
RDZV_HOST = f"$${{{specs.macros.rank0_env}:=localhost}}"

RDZV_READ_TIMEOUT_S = 600
"""How long an agent waits for the c10d store, its first connection included. With torch's
default (60 s, one retry) a pod that starts 150 s before the first pod, e.g. while the first
pod's node still pulls the image, failed with RendezvousConnectionError (measured on CPU);
with 600 s it joined. 600 s is also the rendezvous' default join timeout, how long the first
pod waits for the others."""

BOOTSTRAP_PORT = 48620
"""Port of the Neuron collectives bootstrap (``NEURON_RT_ROOT_COMM_ID``, set to it on every
pod: :data:`ROOT_COMM_ID`); reserved in the pod (net.ipv4.ip_local_reserved_ports) so that no
ephemeral connection takes it first, which hangs the collectives' init. Sources: the pinned BERT sample's run script
(`sysctl -w net.ipv4.ip_local_reserved_ports=48620`),
https://github.com/aws-neuron/aws-neuron-samples/blob/dd0e71f0041f9eb4a5fd3e070df5638d48a67285/torch-neuronx/training/dp_bert_hf_pretrain/run_dp_bert_large_hf_pretrain_bf16_s128.sh
and Neuron's training troubleshooting guide ("Multiworker execution hangs during NCCL init"),
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/frameworks/torch/torch-neuronx/training-troubleshooting.html
"""

ROOT_COMM_HOST_ENV = f"VC_{ROLE_NAME.upper()}_0_HOSTS"
"""The first pod's DNS name, ``<job>-worker-0-0.<job>``, which Volcano's svc plugin gives every
container of every pod of the job (the first pod's own included) from its ConfigMap
(``OnPodCreate``, ``GenerateHosts`` in
https://github.com/volcano-sh/volcano/blob/v1.15.1/pkg/controllers/job/plugins/svc/svc.go);
TorchX names the first task ``<role>-0``."""

# `$$` is TorchX's macro escape (as in RDZV_HOST): bash sees one `$`.
ROOT_COMM_ID = f"NEURON_RT_ROOT_COMM_ID=$${{{ROOT_COMM_HOST_ENV}:-localhost}}:{BOOTSTRAP_PORT}"
"""Bash assignment exported before the launcher: the Neuron runtime's root communicator on the
first pod's name and the reserved port. Unset, torch_xla sets it to ``$MASTER_ADDR:62182``
(``set_rt_root_comm_id`` in
https://github.com/pytorch/xla/blob/master/torch_xla/_internal/neuron.py), a port nothing
reserves. The first pod hosts global rank 0 (so the name is rank 0's, as ``MASTER_ADDR``
would be): torchrun's c10d rendezvous numbers the nodes in the sorted order of their
descriptors, which start with the host's FQDN (``_NodeDesc`` and ``sorted(participants)`` in
torch/distributed/elastic/rendezvous/dynamic_rendezvous.py), and ``<job>-worker-0-0.<job>...``
sorts first among the pods of a job."""

RESUME_FLAG = "--resume_ckpt"
"""The BERT script's switch to resume from the newest ``ckpt_<step>.pt`` in ``--output_dir``
(it asserts that one exists; rank 0 writes one after every ``--shards_per_ckpt`` shards):
https://github.com/aws-neuron/aws-neuron-samples/blob/dd0e71f0041f9eb4a5fd3e070df5638d48a67285/torch-neuronx/training/dp_bert_hf_pretrain/dp_bert_large_hf_pretrain_hdf5.py
"""
OUTPUT_DIR_ARG = "--output_dir"
DATA_DIR_ARG = "--data_dir"

RESERVED_PORTS_SYSCTL = "net.ipv4.ip_local_reserved_ports"
"""A namespaced, safe sysctl (kubelet allows it by default since Kubernetes 1.27, kernel 3.16+):
https://github.com/kubernetes/kubernetes/blob/v1.35.0/pkg/kubelet/sysctl/safe_sysctls.go"""

# Neuron runtime settings of the maintained sample's run scripts (same address as above):
# NEURON_RT_EXEC_TIMEOUT=600 and NEURON_RT_STOCHASTIC_ROUNDING_SEED=0 for every run;
# BUCKET_CAP_MB=512 with the EFA settings for multi-node runs.
NEURON_RUNTIME_ENV = {
    "NEURON_RT_EXEC_TIMEOUT": "600",
    "NEURON_RT_STOCHASTIC_ROUNDING_SEED": "0",
    "BUCKET_CAP_MB": "512",
}

HF_CACHE_DIR = f"{FSX_MOUNT_PATH}/hf_home"
"""The Hugging Face cache (``HF_HOME``) shared by every training pod, on FSx."""

STEPS_ARG = "--steps_this_run"
"""Script argument that bounds a run; precompilation needs it (it traces every step)."""

HEADROOM_SHARE = 16
"""The pod asks for all of a node's vCPUs and memory but 1/16 of each, which is left for the
kubelet reserve, the eviction threshold, the DaemonSets (CNI, kube-proxy, device plugins, FSx
CSI, monitoring) and the memory the kernel keeps (the node's capacity is below the instance's
memory). On trn1.32xlarge (128 vCPUs, 512 GiB) that is the 8 vCPUs and 32 GiB the jobs always
left; on trn2.48xlarge (192 vCPUs, 2 TiB) 12 vCPUs and 128 GiB, as the kernel's share grows with
the memory it manages (a Trn2 node's Capacity and Allocatable, ``kubectl describe node``, are
the check; none was at hand). What the AL2023 nodes reserve
(awslabs/amazon-eks-ami@v20260505:nodeadm/internal/kubelet/config.go,
``withDefaultReservedResources``): kube-reserved CPU 6% of the first core, 1% of the second,
0.5% of the next two, 0.25% of the rest (390m on 128 vCPUs, 550m on 192); kube-reserved memory
11 MiB x maxPods + 255 MiB, maxPods = ENIs x (IPv4 addresses per ENI - 1) + 2 from the AMI's
instance-info.jsonl (trn1.32xlarge 5 x 49 + 2 = 247: 2,972 MiB; trn2.48xlarge 2 x 49 + 2 = 100:
1,355 MiB); evictionHard memory.available 100 MiB."""

# What Trn1 pods have always run with needs no setting: neuronx-cc documents no default
# --target, and torch-neuronx compiles for the platform it runs on (its compile commands on
# Trn1 read `neuronx-cc compile --target=trn1 ...`: tutorials/training/analyze_for_training.rst;
# `torch_neuronx.utils.get_platform_target()`, PyTorch Neuron programming guide); LNC is a
# Trn2/Trn3 setting, --logical-nc-config "Only available on trn2; Default: 2"
# (aws-neuron-sdk@v2.29.1:compiler/neuronx-cc/api-reference-guide/index.rst). Trn1 pods stay
# as they were; other hardware names its target and LNC explicitly, the runtime's
# NEURON_LOGICAL_NC_CONFIG included, which must equal the compiler's ("AWS Neuron currently
# doesn't support setting the compiler flag to a different LNC configuration than the Neuron
# Runtime environment variable", about-neuron/arch/neuron-features/logical-neuroncore-config.rst).
TRN1_COMPILER_DEFAULTS = ("trn1", 1)
"""(``--target``, LNC) that need no setting: every Trn1 row's."""

CACHE_SET_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
NAME_PATTERN = re.compile(r"^[a-z]([-a-z0-9]{0,28}[a-z0-9])?$")
"""Job names: a DNS label of at most 30 characters, so that pod names
``<name>-<torchx suffix>-worker-<i>-0`` stay within 63 characters."""


def trainium_ddp(
    *script_args: str,
    script: str,
    image: str,
    nnodes: int = 2,
    nproc_per_node: int | None = None,
    instance_type: str = "trn1.32xlarge",
    precompile: bool = False,
    cacheset: str = "default",
    max_retries: int = 3,
    name: str = "trainium-ddp",
    rdzv_port: int = RDZV_PORT,
    resume: bool = False,
    data_shards: str = "",
    hf_offline: bool = False,
) -> specs.AppDef:
    """Data-parallel training on Trainium: one pod per node, one worker per NeuronCore.

    Workers rendezvous through torchrun's c10d store on the first pod (found by its Volcano
    DNS name), talk over EFA, and share the FSx for Lustre claim mounted at /data (dataset,
    output, Neuron compile cache, Hugging Face cache). Precision is the script's choice: the
    Neuron BERT sample casts the model to bfloat16 itself (``XLA_DOWNCAST_BF16`` is no longer
    supported since Neuron 2.24, and setting it makes that script skip its own cast).

    Args:
        script_args: Arguments of the training script, passed one by one after ``--``.
        script: Training script in the image's working directory (or an absolute path).
        image: Training image URI (the one ``make image`` pushes).
        nnodes: Trainium nodes (pods); each pod takes a whole node.
        nproc_per_node: Workers per node; default: every NeuronCore of the instance type at
            its default logical NeuronCore size (32 on Trn1, 64 on Trn2).
        instance_type: Trainium instance type of the nodes (a row of
            ``ml_platform.instances.TRAINIUM_INSTANCES``). Trn2 pods also get its compiler
            target and LNC (:func:`compiler_settings`).
        precompile: Run under neuron_parallel_compile to fill the compile cache; the
            script arguments must bound the run with --steps_this_run.
        cacheset: Name of the Neuron compile cache set under /data/neuron_cache; use the
            same name for a precompile run and the training run that reuses it.
        max_retries: Times Volcano restarts the whole job after a pod fails or is evicted.
        name: Job name: lower-case letters, digits and '-', at most 30 characters.
        rdzv_port: Port of the c10d rendezvous store on the first pod.
        resume: Resume from the newest checkpoint in the script's --output_dir when one
            exists (the script's --resume_ckpt), else start fresh: a Volcano restart then
            continues where the last checkpoint left off instead of at step 0.
        data_shards: Glob of the dataset shards in the script's --data_dir. When given, every
            pod counts them first and fails at once with a clear message when there are fewer
            than workers (nnodes x nproc_per_node): the BERT script needs one per worker
            (``assert world_size <= num_files``), and would otherwise fail only after the
            rendezvous and model load. Default "" (no check).
        hf_offline: Read Hugging Face models only from the shared cache on FSx
            (``HF_HUB_OFFLINE=1``), which the dataset Job pre-seeds, instead of every node
            downloading them through the NAT gateway. Default False.
    """
    instance = TRAINIUM_INSTANCES.get(instance_type)
    if nproc_per_node is None and instance is not None:
        nproc_per_node = instance.neuron_cores
    # The torchx CLI hands Optional[int] values over as strings.
    workers = int(nproc_per_node) if nproc_per_node is not None else 0
    problems = component_problems(
        script_args=script_args,
        script=script,
        image=image,
        nnodes=nnodes,
        nproc_per_node=workers,
        instance_type=instance_type,
        precompile=precompile,
        cacheset=cacheset,
        max_retries=max_retries,
        name=name,
        rdzv_port=rdzv_port,
        resume=resume,
        data_shards=data_shards,
    )
    if problems:
        raise ValueError(
            f"trainium_ddp({name!r}): {len(problems)} invalid parameter"
            f"{'s' if len(problems) != 1 else ''}:\n" + "\n".join(f"  - {p}" for p in problems)
        )
    assert instance is not None  # checked above

    role = specs.Role(
        name=ROLE_NAME,
        image=image,
        entrypoint="bash",
        args=_bash_args(
            script,
            script_args,
            nnodes=nnodes,
            workers=workers,
            rdzv_port=rdzv_port,
            precompile=precompile,
            resume=resume,
            data_shards=data_shards,
        ),
        env=_worker_env(cacheset, hf_offline, instance),
        num_replicas=nnodes,
        resource=_whole_node(instance, instance_type),
        max_retries=max_retries,
        # A lost worker breaks the collective: restart every pod, not just the failed one.
        retry_policy=specs.RetryPolicy.APPLICATION,
        mounts=[specs.VolumeMount(src=FSX_CLAIM, dst_path=FSX_MOUNT_PATH)],
        port_map={RDZV_BACKEND: rdzv_port},
    )
    _set_pod_overlay(role)
    return specs.AppDef(name=name, roles=[role])


def _bash_args(
    script: str,
    script_args: tuple[str, ...],
    *,
    nnodes: int,
    workers: int,
    rdzv_port: int,
    precompile: bool,
    resume: bool,
    data_shards: str,
) -> list[str]:
    """``bash -c`` arguments: the checks of the prologue (locked memory, dataset shards,
    resume), then torchrun (under
    neuron_parallel_compile for a precompile run) exec'd."""
    launcher = [
        "python3", "-m", "torch.distributed.run",
        "--rdzv_backend", RDZV_BACKEND,
        "--rdzv_conf", f"read_timeout={RDZV_READ_TIMEOUT_S}",
        "--rdzv_endpoint", f"{RDZV_HOST}:{rdzv_port}",
        "--rdzv_id", specs.macros.app_id,
        "--nnodes", str(nnodes),
        "--nproc_per_node", str(workers),
        "--tee", "3",
        script,
        *script_args,
    ]  # fmt: skip
    # neuron_parallel_compile takes the command as separate arguments (one joined string would
    # be taken as a file name: "File name too long").
    if precompile:
        launcher = ["neuron_parallel_compile", *launcher]
    # bash expands the rendezvous host's env var, as in TorchX's dist.torchrun; the launcher
    # is exec'd, so torchrun still receives the kubelet's SIGTERM.
    prologue = [MEMLOCK_CHECK, f"export {ROOT_COMM_ID}"]
    if data_shards:
        data_dir = _arg_value(script_args, DATA_DIR_ARG) or ""
        prologue.append(shard_check(data_dir, data_shards, nnodes * workers))
    if resume:
        prologue.append(resume_check(_arg_value(script_args, OUTPUT_DIR_ARG) or ""))
        launcher.append(RESUME_ARGS)
    line = _bash_join(launcher, unquoted={f"{RDZV_HOST}:{rdzv_port}", RESUME_ARGS})
    return ["-c", "; ".join([*prologue, f"exec {line}"])]


def _worker_env(cacheset: str, hf_offline: bool, instance: TrainiumInstance) -> dict[str, str]:
    """The workers' environment: EFA, the Neuron runtime and compiler (:func:`compiler_settings`),
    the compile and Hugging Face caches."""
    replica = specs.macros.replica_id
    lnc_env, compiler_flags = compiler_settings(instance)
    env = {
        "CCOM_SOCKET_IFNAME": "eth0",
        "FI_PROVIDER": "efa",
        "FI_EFA_USE_DEVICE_RDMA": "1",
        "FI_EFA_FORK_SAFE": "1",
        "NEURON_RT_RESET_CORES": "1",
        "XLA_TRANSFER_SEED_ASYNC": "1",
        **NEURON_RUNTIME_ENV,
        **lnc_env,
        "NEURON_CC_FLAGS": " ".join(
            [f"--cache_dir={FSX_MOUNT_PATH}/neuron_cache/{cacheset}_{replica}", *compiler_flags]
        ),
        # HF_HOME replaces the deprecated TRANSFORMERS_CACHE (transformers v5 drops it). One
        # cache for every pod (/data is mounted with flock, so concurrent downloads wait on one
        # another); the dataset Job pre-seeds it (HF_CACHE_DIR).
        "HF_HOME": HF_CACHE_DIR,
    }
    if hf_offline:
        # Hugging Face "Offline mode": no calls to the Hub, files from the cache only.
        # https://huggingface.co/docs/transformers/installation#offline-mode
        env["HF_HUB_OFFLINE"] = "1"
    return env


def compiler_settings(instance: TrainiumInstance) -> tuple[dict[str, str], list[str]]:
    """The runtime environment and ``NEURON_CC_FLAGS`` flags that select ``instance``'s compiler
    target and logical NeuronCore size; none where they are :data:`TRN1_COMPILER_DEFAULTS`."""
    if (instance.compiler_target, instance.lnc_default) == TRN1_COMPILER_DEFAULTS:
        return {}, []
    lnc = str(instance.lnc_default)
    return (
        {"NEURON_LOGICAL_NC_CONFIG": lnc},
        [f"--target={instance.compiler_target}", f"--logical-nc-config={lnc}"],
    )


def node_headroom(instance: TrainiumInstance) -> tuple[int, int]:
    """vCPUs and GiB of memory a training pod leaves on a node of ``instance``
    (:data:`HEADROOM_SHARE`)."""
    return instance.vcpus // HEADROOM_SHARE, instance.memory_gib // HEADROOM_SHARE


def _whole_node(instance: TrainiumInstance, instance_type: str) -> specs.Resource:
    """A whole node of ``instance_type``: its CPUs and memory less the headroom
    (:func:`node_headroom`), every Trainium device and every EFA interface."""
    cpu_headroom, memory_headroom_gib = node_headroom(instance)
    return specs.Resource(
        cpu=instance.vcpus - cpu_headroom,
        gpu=0,
        memMB=(instance.memory_gib - memory_headroom_gib) * 1024,
        # The renderer turns this capability into a nodeSelector.
        capabilities={INSTANCE_TYPE_LABEL: instance_type},
        # Whole node: every Trainium chip and every EFA interface. `neurondevice`, which
        # TorchX's named resources still use, was removed in Neuron 2.22.
        devices={NEURON_RESOURCE: instance.neuron_devices, EFA_RESOURCE: instance.efa_interfaces},
    )


def _set_pod_overlay(role: specs.Role) -> None:
    """The pod fields the AppDef has no words for: the Neuron taint's toleration, the
    reserved bootstrap port, no service account token (through the Kubernetes pod overlay)."""
    set_overlay(
        role,
        "kubernetes",
        "V1Pod",
        {
            "spec": {
                "tolerations": [
                    {"key": NEURON_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
                ],
                "securityContext": {
                    "sysctls": [{"name": RESERVED_PORTS_SYSCTL, "value": str(BOOTSTRAP_PORT)}]
                },
                # The workers call no Kubernetes API (c10d rendezvous is plain TCP; Volcano's
                # svc plugin hands them the peers' names through a ConfigMap volume and
                # environment) and use no AWS credentials: no service account token.
                "automountServiceAccountToken": False,
            }
        },
    )


MEMLOCK_CHECK = (
    'memlock=$$(ulimit -l); if [ "$$memlock" != unlimited ]; then echo "ERROR: the '
    "locked-memory limit of this container (ulimit -l) is $$memlock KiB, not unlimited: EFA "
    "pins memory for its queues and the Neuron collectives fail or hang without it. The "
    "Trainium launch template's user data raises containerd's limit (LimitMEMLOCK=infinity); "
    "a node started without it (another launch template or AMI) needs it too, then new "
    'nodes (docs/training.md, First-node checks)." >&2; exit 1; fi'
)
"""Bash, first in every training pod: stop with a clear message unless ``ulimit -l`` is
``unlimited``. A container inherits the limit from containerd (AL2023's base runtime spec sets
only ``RLIMIT_NOFILE``), which :mod:`ml_platform.constructs._user_data` raises on the
Trainium nodes; without it the run would fail later, in the collectives' init, with a far less
clear error."""

RESUME_ARGS = '"$${resume[@]}"'
"""The launcher's last argument with ``resume``: :data:`RESUME_FLAG`, or nothing."""


def shard_check(data_dir: str, pattern: str, workers: int) -> str:
    """Bash that exits 1 with a message when ``data_dir`` holds fewer files matching
    ``pattern`` than ``workers``."""
    shards = shlex.quote(f"{data_dir}/{pattern}")
    message = (
        f"{data_dir} holds $$shards dataset shards ({pattern}), fewer than the {workers} "
        "workers of this job: the training script needs at least one shard per worker. Copy "
        "the dataset first (training-dataset.yaml) or run fewer workers."
    )
    return (
        f"shards=$$(compgen -G {shards} | wc -l); "
        f'if [ "$$shards" -lt {workers} ]; then echo "ERROR: {message}" >&2; exit 1; fi'
    )


def resume_check(output_dir: str) -> str:
    """Bash that sets ``resume`` to :data:`RESUME_FLAG` when ``output_dir`` holds a
    ``ckpt_*.pt`` checkpoint, else to nothing. Every pod decides alike: they share FSx, and
    only rank 0 writes checkpoints, while training runs."""
    # Quoted: compgen globs the pattern itself.
    checkpoints = shlex.quote(f"{output_dir}/ckpt_*.pt")
    return (
        f"resume=(); if compgen -G {checkpoints} > /dev/null; then "
        f"resume=({RESUME_FLAG}); echo {shlex.quote(f'resuming from the newest checkpoint in {output_dir}')}; "
        "fi"
    )


def _arg_value(args: tuple[str, ...] | list[str], flag: str) -> str | None:
    """The value of ``flag`` in ``args`` (``--flag value`` or ``--flag=value``)."""
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _bash_join(argv: list[str], *, unquoted: set[str]) -> str:
    """``shlex.join`` leaving the ``unquoted`` arguments to bash's expansion."""
    return " ".join(a if a in unquoted else shlex.quote(a) for a in argv)


def component_problems(
    *,
    script_args: tuple[str, ...] | list[str],
    script: str,
    image: str,
    nnodes: int,
    nproc_per_node: int,
    instance_type: str,
    precompile: bool,
    cacheset: str,
    max_retries: int,
    name: str,
    rdzv_port: int = RDZV_PORT,
    resume: bool = False,
    data_shards: str = "",
) -> list[str]:
    """Every problem with the component's parameters that needs no cluster settings."""
    out: list[str] = []
    instance = TRAINIUM_INSTANCES.get(instance_type)
    if instance is None:
        out.append(
            f"instance_type = {instance_type!r}: expected one of {sorted(TRAINIUM_INSTANCES)}"
        )
    if not NAME_PATTERN.match(name):
        out.append(
            f"name = {name!r}: expected lower-case letters, digits and '-', starting with a "
            "letter, at most 30 characters"
        )
    if not script.strip():
        out.append("script = '': expected the training script's file name")
    if not image.strip():
        out.append("image = '': expected a container image URI")
    if nnodes < 1:
        out.append(f"nnodes = {nnodes}: expected at least 1")
    if instance is not None and not 1 <= nproc_per_node <= instance.neuron_cores:
        out.append(
            f"nproc_per_node = {nproc_per_node}: expected 1 to {instance.neuron_cores} "
            f"(NeuronCores of one {instance_type})"
        )
    if not CACHE_SET_PATTERN.match(cacheset):
        out.append(
            f"cacheset = {cacheset!r}: expected letters, digits, '_' and '-' (starting with a "
            "letter or digit, at most 63 characters); it becomes a directory name"
        )
    if precompile and not any(a == STEPS_ARG or a.startswith(STEPS_ARG + "=") for a in script_args):
        out.append(
            f"precompile = True needs {STEPS_ARG} <n> in the script arguments (got "
            f"{list(script_args)!r}): neuron_parallel_compile traces every step it runs"
        )
    if max_retries < 0:
        out.append(f"max_retries = {max_retries}: expected 0 or more")
    if data_shards and not _arg_value(script_args, DATA_DIR_ARG):
        out.append(
            f"data_shards = {data_shards!r} needs {DATA_DIR_ARG} <dir> in the script "
            "arguments: the shards are counted there"
        )
    if resume:
        output_dir = _arg_value(script_args, OUTPUT_DIR_ARG)
        if not output_dir:
            out.append(
                f"resume = True needs {OUTPUT_DIR_ARG} <dir> in the script arguments: the "
                "checkpoints are looked for there"
            )
        if RESUME_FLAG in script_args:
            out.append(f"resume = True adds {RESUME_FLAG} itself; drop it from the arguments")
        if precompile:
            out.append(
                "resume = True with precompile = True: a precompile run saves no "
                "checkpoint to resume from"
            )
    if not 1024 <= rdzv_port <= 65535 or rdzv_port == BOOTSTRAP_PORT:
        out.append(
            f"rdzv_port = {rdzv_port}: expected 1024 to 65535, not the reserved Neuron "
            f"bootstrap port {BOOTSTRAP_PORT}"
        )
    return out
