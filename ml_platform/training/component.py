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
        -- --batch_size 16 --grad_accum_usteps 32 --output_dir /data/output \\
           --data_dir /data/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128

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

import re

import torchx.specs as specs
from torchx.specs.overlays import set_overlay

from ml_platform.instances import TRAINIUM_INSTANCES
from ml_platform.k8s_charts.names import (
    EFA_RESOURCE,
    ETCD_CLIENT_PORT,
    ETCD_SERVICE,
    FSX_CLAIM,
    FSX_MOUNT_PATH,
    INSTANCE_TYPE_LABEL,
    NEURON_RESOURCE,
    NEURON_TAINT_KEY,
)

ROLE_NAME = "worker"
"""Role (and so Volcano task) name: pods are ``<job>-worker-<replica>-0``."""

# The tutorial's `etcd-server:2379`: the cluster chart gives the training namespace an
# ExternalName Service `etcd-server` that points at etcd in its own namespace.
RDZV_ENDPOINT = f"{ETCD_SERVICE}:{ETCD_CLIENT_PORT}"

STEPS_ARG = "--steps_this_run"
"""Script argument that bounds a run; precompilation needs it (it traces every step)."""

CPU_HEADROOM = 8
"""vCPUs left per node for the kubelet reserve and the DaemonSets (CNI, device plugins,
FSx CSI, monitoring): the pod asks for the rest."""

MEMORY_HEADROOM_GIB = 32
"""Memory left per node for the same reasons."""

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
    bf16: bool = True,
    precompile: bool = False,
    cacheset: str = "default",
    max_retries: int = 3,
    name: str = "trainium-ddp",
    rdzv_endpoint: str = RDZV_ENDPOINT,
) -> specs.AppDef:
    """Data-parallel training on Trainium: one pod per node, one worker per NeuronCore.

    Workers rendezvous through etcd (TorchElastic), talk over EFA, and share the FSx for
    Lustre claim mounted at /data (dataset, output, Neuron compile cache).

    Args:
        script_args: Arguments of the training script, passed one by one after ``--``.
        script: Training script in the image's working directory (or an absolute path).
        image: Training image URI (the one ``make image`` pushes).
        nnodes: Trainium nodes (pods); each pod takes a whole node.
        nproc_per_node: Workers per node; default: every NeuronCore of the instance type.
        instance_type: Trainium instance type of the nodes (trn1.32xlarge or trn1n.32xlarge).
        bf16: Downcast to bfloat16 (sets XLA_DOWNCAST_BF16=1).
        precompile: Run under neuron_parallel_compile to fill the compile cache; the
            script arguments must bound the run with --steps_this_run.
        cacheset: Name of the Neuron compile cache set under /data/neuron_cache; use the
            same name for a precompile run and the training run that reuses it.
        max_retries: Times Volcano restarts the whole job after a pod fails or is evicted.
        name: Job name: lower-case letters, digits and '-', at most 30 characters.
        rdzv_endpoint: host:port of the etcd server used for the rendezvous.
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
    )
    if problems:
        raise ValueError(
            f"trainium_ddp({name!r}): {len(problems)} invalid parameter"
            f"{'s' if len(problems) != 1 else ''}:\n" + "\n".join(f"  - {p}" for p in problems)
        )
    assert instance is not None  # checked above

    launcher = [
        "python3", "-m", "torch.distributed.run",
        "--rdzv_backend", "etcd",
        "--rdzv_endpoint", rdzv_endpoint,
        "--rdzv_id", specs.macros.app_id,
        "--nnodes", str(nnodes),
        "--nproc_per_node", str(workers),
        "--tee", "3",
        "--role", "",
        script,
        *script_args,
    ]  # fmt: skip
    # neuron_parallel_compile takes the command as separate arguments; one joined string
    # would be taken as a file name ("File name too long").
    if precompile:
        entrypoint, args = "neuron_parallel_compile", launcher
    else:
        entrypoint, args = launcher[0], launcher[1:]

    cache_root = f"{FSX_MOUNT_PATH}/neuron_cache/{cacheset}_{specs.macros.replica_id}"
    env = {
        "CCOM_SOCKET_IFNAME": "eth0",
        "FI_PROVIDER": "efa",
        "FI_EFA_USE_DEVICE_RDMA": "1",
        "FI_EFA_FORK_SAFE": "1",
        "NEURON_RT_RESET_CORES": "1",
        "XLA_TRANSFER_SEED_ASYNC": "1",
        "NEURON_CC_FLAGS": f"--cache_dir={cache_root}",
        "TRANSFORMERS_CACHE": (
            f"{FSX_MOUNT_PATH}/transformers_cache/{cacheset}_{specs.macros.replica_id}"
        ),
    }
    if bf16:
        env["XLA_DOWNCAST_BF16"] = "1"

    resource = specs.Resource(
        cpu=instance.vcpus - CPU_HEADROOM,
        gpu=0,
        memMB=(instance.memory_gib - MEMORY_HEADROOM_GIB) * 1024,
        # The renderer turns this capability into a nodeSelector.
        capabilities={INSTANCE_TYPE_LABEL: instance_type},
        # Whole node: every Trainium chip and every EFA interface. `neurondevice`, which
        # TorchX's named resources still use, was removed in Neuron 2.22.
        devices={NEURON_RESOURCE: instance.neuron_devices, EFA_RESOURCE: instance.efa_interfaces},
    )
    role = specs.Role(
        name=ROLE_NAME,
        image=image,
        entrypoint=entrypoint,
        args=args,
        env=env,
        num_replicas=nnodes,
        resource=resource,
        max_retries=max_retries,
        # A lost worker breaks the collective: restart every pod, not just the failed one.
        retry_policy=specs.RetryPolicy.APPLICATION,
        mounts=[specs.VolumeMount(src=FSX_CLAIM, dst_path=FSX_MOUNT_PATH)],
    )
    # Fields the AppDef has no words for go through the Kubernetes pod overlay.
    set_overlay(
        role,
        "kubernetes",
        "V1Pod",
        {
            "spec": {
                "tolerations": [
                    {"key": NEURON_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
                ]
            }
        },
    )
    return specs.AppDef(name=name, roles=[role])


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
    return out
