"""The training jobs the platform ships, and their checks against the cluster's settings.

A :class:`TrainingJob` holds the arguments of the TorchX component
(:func:`ml_platform.training.component.trainium_ddp`); :func:`validate_jobs` checks them
against the ``trainium`` settings before anything is rendered.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from torchx.specs import AppDef

from ml_platform.config import Settings
from ml_platform.instances import TRAINIUM_INSTANCES
from ml_platform.k8s_charts.names import FSX_MOUNT_PATH
from ml_platform.training.component import component_problems, trainium_ddp

# The BERT-large phase-1 pretraining of the source tutorial.
BERT_SCRIPT = "dp_bert_large_hf_pretrain_hdf5.py"
BERT_DATASET = "bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128"
BERT_DATASET_URI = (
    "s3://neuron-s3/training_datasets/bert_pretrain_wikicorpus_tokenized_hdf5/"
    f"{BERT_DATASET}.tar"
)  # public bucket: read with --no-sign-request
BERT_DATA_DIR = f"{FSX_MOUNT_PATH}/{BERT_DATASET}"
BERT_OUTPUT_DIR = f"{FSX_MOUNT_PATH}/output"  # checkpoints and TensorBoard event files
BERT_ARGS: tuple[str, ...] = (
    "--batch_size", "16",
    "--grad_accum_usteps", "32",
    "--data_dir", BERT_DATA_DIR,
    "--output_dir", BERT_OUTPUT_DIR,
)  # fmt: skip
BERT_PRECOMPILE_STEPS = 10
BERT_CACHE_SET = "bert-large"  # shared by precompile and training so training reuses graphs


@dataclass(frozen=True)
class TrainingJob:
    """Arguments of one ``trainium_ddp`` job.

    Attributes:
        name: Job name (Volcano Job and pod name prefix).
        script: Training script in the image's working directory.
        script_args: Arguments of the script, one item each.
        nodes: Trainium nodes (one pod each).
        instance_type: Instance type the job asks for; must be the cluster's.
        nproc_per_node: Workers per node. Default ``None``: every NeuronCore of the instance.
        bf16: Downcast to bfloat16. Default ``True``.
        precompile: Run under neuron_parallel_compile. Default ``False``.
        cache_set: Neuron compile cache set. Default ``default``.
        max_retries: Job restarts on pod failure or eviction. Default 3.
    """

    name: str
    script: str
    script_args: tuple[str, ...]
    nodes: int
    instance_type: str
    nproc_per_node: int | None = None
    bf16: bool = True
    precompile: bool = False
    cache_set: str = "default"
    max_retries: int = 3

    @property
    def workers_per_node(self) -> int | None:
        """``nproc_per_node`` with its default resolved (``None`` for an unknown instance)."""
        if self.nproc_per_node is not None:
            return self.nproc_per_node
        instance = TRAINIUM_INSTANCES.get(self.instance_type)
        return instance.neuron_cores if instance else None

    def to_app(self, image: str) -> AppDef:
        """The TorchX AppDef of this job (raises ``ValueError`` on invalid arguments)."""
        return trainium_ddp(
            *self.script_args,
            script=self.script,
            image=image,
            nnodes=self.nodes,
            nproc_per_node=self.nproc_per_node,
            instance_type=self.instance_type,
            bf16=self.bf16,
            precompile=self.precompile,
            cacheset=self.cache_set,
            max_retries=self.max_retries,
            name=self.name,
        )

    def problems(self, settings: Settings) -> list[str]:
        """Every problem with this job, on its own and on the configured cluster."""
        out = component_problems(
            script_args=self.script_args,
            script=self.script,
            image=settings.training_image_uri,
            nnodes=self.nodes,
            nproc_per_node=self.workers_per_node or 0,
            instance_type=self.instance_type,
            precompile=self.precompile,
            cacheset=self.cache_set,
            max_retries=self.max_retries,
            name=self.name,
        )
        trn = settings.trainium
        if self.instance_type != trn.instance_type:
            out.append(
                f"instance_type = {self.instance_type!r}: the cluster's Trainium nodes are "
                f"trainium.instance_type = {trn.instance_type!r}"
            )
        cluster_instance = TRAINIUM_INSTANCES.get(trn.instance_type)
        if cluster_instance is not None:
            if self.nodes > trn.max_nodes:
                out.append(
                    f"nodes = {self.nodes}: exceeds trainium.max_nodes = {trn.max_nodes} "
                    "(each pod takes a whole node)"
                )
            workers = self.nodes * (self.workers_per_node or 0)
            capacity = trn.max_nodes * cluster_instance.neuron_cores
            if workers > capacity:
                out.append(
                    f"nodes x nproc_per_node = {self.nodes} x {self.workers_per_node} = "
                    f"{workers} workers: exceeds the cluster's {capacity} NeuronCores "
                    f"(trainium.max_nodes = {trn.max_nodes} x {cluster_instance.neuron_cores} "
                    f"per {trn.instance_type})"
                )
        return [f"{self.name}: {p}" for p in out]


def validate_jobs(settings: Settings, jobs: Iterable[TrainingJob]) -> None:
    """Raise one ``ValueError`` listing every problem of every job (none: return)."""
    jobs = list(jobs)
    problems = [p for job in jobs for p in job.problems(settings)]
    names = [job.name for job in jobs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        problems.append(f"job names must be unique, repeated: {duplicates}")
    if problems:
        raise ValueError(
            f"Invalid training jobs ({len(problems)} problem{'s' if len(problems) != 1 else ''}):\n"
            + "\n".join(f"  - {p}" for p in problems)
        )


def bert_jobs(settings: Settings) -> tuple[TrainingJob, TrainingJob]:
    """The tutorial's two jobs on the configured node group: precompile, then pretrain.

    Both use every node (``trainium.nodes``, or ``max_nodes`` when the group is scaled to
    zero) and every NeuronCore, and share one compile cache set.
    """
    trn = settings.trainium
    nodes = trn.nodes or trn.max_nodes
    precompile = TrainingJob(
        name="bert-precompile",
        script=BERT_SCRIPT,
        script_args=BERT_ARGS + ("--steps_this_run", str(BERT_PRECOMPILE_STEPS)),
        nodes=nodes,
        instance_type=trn.instance_type,
        precompile=True,
        cache_set=BERT_CACHE_SET,
    )
    pretrain = TrainingJob(
        name="bert-pretrain",
        script=BERT_SCRIPT,
        script_args=BERT_ARGS,
        nodes=nodes,
        instance_type=trn.instance_type,
        cache_set=BERT_CACHE_SET,
    )
    return precompile, pretrain
