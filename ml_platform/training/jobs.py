"""The training jobs the platform ships, and their checks against the cluster's settings.

A :class:`TrainingJob` holds the arguments of the TorchX component
(:func:`ml_platform.training.component.trainium_ddp`); :func:`validate_jobs` checks them
against the ``trainium`` settings before anything is rendered.
"""

from __future__ import annotations

__all__ = [
    "BERT_DATASET_URI",
    "BERT_DATA_DIR",
    "BERT_HF_MODEL",
    "BERT_OUTPUT_DIR",
    "DATASETS_DIR",
    "TrainingJob",
    "bert_args",
    "bert_jobs",
    "bert_nodes",
    "bert_problems",
    "validate_jobs",
]

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ml_platform.config import Settings
from ml_platform.instances import TRAINIUM_INSTANCES
from ml_platform.k8s_names import FSX_MOUNT_PATH

if TYPE_CHECKING:
    from torchx.specs import AppDef

# The component (and so torchx) is imported where a job is checked or rendered, not here:
# `cdk synth` reads bert_problems from this module and never renders a job.

# The BERT-large phase-1 pretraining of the source tutorial.
BERT_SCRIPT = "dp_bert_large_hf_pretrain_hdf5.py"
BERT_DATASET = "bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128"
BERT_DATASET_URI = (
    "s3://neuron-s3/training_datasets/bert_pretrain_wikicorpus_tokenized_hdf5/"
    f"{BERT_DATASET}.tar"
)  # public bucket: read with --no-sign-request
DATASETS_DIR = f"{FSX_MOUNT_PATH}/datasets"
"""Datasets live here, apart from the compile and Hugging Face caches and the output."""
BERT_DATA_DIR = f"{DATASETS_DIR}/{BERT_DATASET}"
BERT_OUTPUT_DIR = f"{FSX_MOUNT_PATH}/output"  # checkpoints and TensorBoard event files
# Phase-1 recipe of the maintained sample's run script (full bf16: the script casts the model
# itself; FP32 optimizer state): 16 sequences per worker, 32 accumulation micro-steps on one
# 32-NeuronCore trn1.32xlarge, i.e. a global batch of 16,384 sequences. Across nodes the script
# divides the micro-steps by the node count (GRAD_ACCUM_USTEPS/WORLD_SIZE_JOB) to keep that
# global batch:
# https://github.com/aws-neuron/aws-neuron-samples/blob/dd0e71f0041f9eb4a5fd3e070df5638d48a67285/torch-neuronx/training/dp_bert_hf_pretrain/run_dp_bert_large_hf_pretrain_bf16_s128.sh
# On Trn2 the same script (its trn2 support came in dfa8b5a and d6e1754, 2024-12, ancestors
# of that commit) starts one worker per NeuronCore neuron-ls shows (64 on a trn2.48xlarge at
# LNC=2: Neuron's "Logical NeuronCore configuration" page) but keeps 16 x 32, which would
# double the global batch; the recipe's batch is 16,384 ("gradient accumulation microsteps of
# 32 to maintain global batch size of 16384 for phase 1", Neuron's BERT pretraining tutorial,
# aws-neuron-sdk@v2.29.1:frameworks/torch/torch-neuronx/tutorials/training/bert.rst), so the
# micro-steps follow from the workers instead: 16,384 / (nodes x workers per node x 16).
BERT_HF_MODEL = "bert-large-uncased"
"""The Hub model the script builds its configuration from (``get_model``:
``BertForPreTraining.from_pretrained('bert-large-uncased')``, same source as BERT_SCRIPT)."""
BERT_SHARDS = "*_training_*.hdf5"
"""The script's glob of training shards in --data_dir (``glob(data_dir + "/*_training_*.hdf5")``)."""
BERT_BATCH_SIZE = 16
"""Sequences per worker and micro-step (``--batch_size``)."""
BERT_GLOBAL_BATCH = 16_384
"""Sequences per optimizer step over every worker, the batch the recipe's learning rate is set for."""
BERT_PRECOMPILE_STEPS = 10
BERT_CACHE_SET = "bert-large"  # shared by precompile and training so training reuses graphs


def bert_grad_accum_usteps(nodes: int, workers_per_node: int) -> int:
    """Accumulation micro-steps per worker that keep :data:`BERT_GLOBAL_BATCH` on ``nodes``
    nodes of ``workers_per_node`` workers (at least 1; :func:`bert_problems` reports the
    counts that do not divide it)."""
    return max(1, BERT_GLOBAL_BATCH // (nodes * workers_per_node * BERT_BATCH_SIZE))


def bert_args(nodes: int, workers_per_node: int) -> tuple[str, ...]:
    """Arguments of the BERT script for a job on ``nodes`` whole nodes of
    ``workers_per_node`` workers each."""
    return (
        "--batch_size", str(BERT_BATCH_SIZE),
        "--grad_accum_usteps", str(bert_grad_accum_usteps(nodes, workers_per_node)),
        "--data_dir", BERT_DATA_DIR,
        "--output_dir", BERT_OUTPUT_DIR,
    )  # fmt: skip


def bert_problems(settings: Settings) -> list[str]:
    """Problems of the BERT recipe on the configured nodes (none: empty): the global batch
    must be a whole number of micro-steps of every worker's batch."""
    instance = TRAINIUM_INSTANCES.get(settings.trainium.instance_type)
    if instance is None:  # the settings report an unknown instance type themselves
        return []
    nodes = bert_nodes(settings)
    workers = instance.neuron_cores
    per_step = workers * BERT_BATCH_SIZE  # sequences of one node's micro-step
    if BERT_GLOBAL_BATCH % per_step:
        return [
            f"trainium.instance_type = {instance.name!r}: its {workers} workers x "
            f"{BERT_BATCH_SIZE} sequences do not divide the BERT recipe's global batch of "
            f"{BERT_GLOBAL_BATCH:,} sequences"
        ]
    # Micro-steps one node would need alone: the node count must divide them.
    node_steps = BERT_GLOBAL_BATCH // per_step
    if node_steps % nodes:
        allowed = [n for n in range(1, node_steps + 1) if node_steps % n == 0]
        return [
            f"trainium.nodes = {nodes}: the BERT recipe keeps its global batch of "
            f"{BERT_GLOBAL_BATCH:,} sequences by dividing {node_steps} accumulation "
            f"micro-steps ({workers} workers per {instance.name} x {BERT_BATCH_SIZE} "
            f"sequences each) by the node count; expected one of {allowed}"
        ]
    return []


def bert_nodes(settings: Settings) -> int:
    """Nodes of the BERT jobs: ``trainium.nodes``, or ``max_nodes`` for a group scaled to 0."""
    return settings.trainium.nodes or settings.trainium.max_nodes


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
        precompile: Run under neuron_parallel_compile. Default ``False``.
        cache_set: Neuron compile cache set. Default ``default``.
        max_retries: Job restarts on pod failure or eviction. Default 3.
        resume: Resume from the newest checkpoint in ``--output_dir`` when there is one.
            Default ``False``.
        data_shards: Glob of the dataset shards in ``--data_dir`` to count before starting.
            Default "" (no check).
        hf_offline: Hugging Face models from the pre-seeded cache only. Default ``False``.
    """

    name: str
    script: str
    script_args: tuple[str, ...]
    nodes: int
    instance_type: str
    nproc_per_node: int | None = None
    precompile: bool = False
    cache_set: str = "default"
    max_retries: int = 3
    resume: bool = False
    data_shards: str = ""
    hf_offline: bool = False

    @property
    def workers_per_node(self) -> int | None:
        """``nproc_per_node`` with its default resolved (``None`` for an unknown instance)."""
        if self.nproc_per_node is not None:
            return self.nproc_per_node
        instance = TRAINIUM_INSTANCES.get(self.instance_type)
        return instance.neuron_cores if instance else None

    def to_app(self, image: str) -> AppDef:
        """The TorchX AppDef of this job (raises ``ValueError`` on invalid arguments)."""
        from ml_platform.training.component import trainium_ddp

        return trainium_ddp(
            *self.script_args,
            script=self.script,
            image=image,
            nnodes=self.nodes,
            nproc_per_node=self.nproc_per_node,
            instance_type=self.instance_type,
            precompile=self.precompile,
            cacheset=self.cache_set,
            max_retries=self.max_retries,
            name=self.name,
            resume=self.resume,
            data_shards=self.data_shards,
            hf_offline=self.hf_offline,
        )

    def problems(self, settings: Settings) -> list[str]:
        """Every problem with this job, on its own and on the configured cluster."""
        from ml_platform.training.component import component_problems

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
            resume=self.resume,
            data_shards=self.data_shards,
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


def validate_jobs(
    settings: Settings, jobs: Iterable[TrainingJob], *, problems: Iterable[str] = ()
) -> None:
    """Raise one ``ValueError`` listing every problem of every job, after the given
    ``problems`` (none at all: return)."""
    jobs = list(jobs)
    problems = [*problems, *(p for job in jobs for p in job.problems(settings))]
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

    Both use every node (:func:`bert_nodes`) and every NeuronCore of the instance type, share
    one compile cache set, and keep the recipe's global batch (:func:`bert_grad_accum_usteps`;
    check :func:`bert_problems` for node counts that cannot).
    """
    trn = settings.trainium
    nodes = bert_nodes(settings)
    # Every NeuronCore of the instance (at its default LNC) runs one worker.
    args = bert_args(nodes, TRAINIUM_INSTANCES[trn.instance_type].neuron_cores)
    precompile = TrainingJob(
        name="bert-precompile",
        script=BERT_SCRIPT,
        script_args=args + ("--steps_this_run", str(BERT_PRECOMPILE_STEPS)),
        nodes=nodes,
        instance_type=trn.instance_type,
        precompile=True,
        cache_set=BERT_CACHE_SET,
        data_shards=BERT_SHARDS,
        hf_offline=True,  # the dataset Job pre-seeds BERT_HF_MODEL
    )
    pretrain = TrainingJob(
        name="bert-pretrain",
        script=BERT_SCRIPT,
        script_args=args,
        nodes=nodes,
        instance_type=trn.instance_type,
        cache_set=BERT_CACHE_SET,
        # A Volcano restart continues from the newest checkpoint on FSx, not from step 0.
        resume=True,
        data_shards=BERT_SHARDS,
        hf_offline=True,  # the dataset Job pre-seeds BERT_HF_MODEL
    )
    return precompile, pretrain
