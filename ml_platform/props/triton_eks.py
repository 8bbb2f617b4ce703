"""The props :class:`~ml_platform.constructs.triton_eks.TritonOnEks` shares with the
``triton_on_eks`` settings: the GPU nodes, the replicas and the archives, with their rules."""

from dataclasses import dataclass
from typing import Annotated

from ml_platform import limits
from ml_platform._settings_parse import Between, OneOf, Problem, Section, setting
from ml_platform.instances import EKS_GPU_INSTANCES
from ml_platform.limits import IntRange
from ml_platform.triton.archive_names import ref_problems
from ml_platform.triton.kinds import DEFAULT_EKS_ARCHIVES
from ml_platform.triton.targets import gpu_problem

#: The single-GPU instance types an EKS GPU node group runs (the one rule of
#: ``gpu_instance_type`` here and of ``GpuNodeGroup``'s ``instance_type``).
GPU_INSTANCE_TYPES = OneOf(tuple(sorted(EKS_GPU_INSTANCES)))


@dataclass(frozen=True)
class _Named(Problem):
    """A problem already worded with its bare names first (``archives[0] = 'x': ...``,
    ``archives: ...``), as the archive helpers word theirs: the section's key goes in front."""

    def worded(self, prefix: str = "") -> str:
        return f"{prefix}.{self.text}" if prefix else self.text


@dataclass(frozen=True, kw_only=True)
class TritonOnEksPropsBase(Section):
    """The GPU nodes, replicas and archives of Triton on EKS, and the rules between them."""

    gpu_instance_type: Annotated[str, GPU_INSTANCE_TYPES] = setting(
        limits.DEFAULT_GPU_INSTANCE_TYPE
    )
    """Single-GPU EC2 instance type of the GPU node group."""
    gpu_nodes: Annotated[int, Between(IntRange(1, limits.GPU_MAX_NODES))] = setting(
        limits.DEFAULT_GPU_NODES
    )
    """GPU nodes: the node group's desired and maximum size (nothing in the platform scales
    it)."""
    replicas: int = setting(limits.DEFAULT_REPLICAS, minimum=1, maximum=limits.GPU_MAX_NODES)
    """Triton replicas: fixed (no autoscaler), at most `gpu_nodes` (each takes a whole
    single-GPU node)."""
    max_surge: Annotated[int, Between(IntRange(0, limits.GPU_MAX_NODES))] = setting(0)
    """Pods a rollout starts before stopping old ones; each needs a spare GPU node, so
    `replicas + max_surge <= gpu_nodes`. Default 0: a rollout stops a pod first, which with one
    replica makes every rollout an outage (synthesis warns, `ml-platform:tritonRolloutOutage`).
    1 with `gpu_nodes = replicas + 1`: old pods serve until the new one is ready (the spare
    node costs a GPU instance)."""
    archives: tuple[str, ...] = setting(DEFAULT_EKS_ARCHIVES, minItems=1, uniqueItems=True)
    """Archives the Triton pods load: logical names of the archives this repository builds
    (the newest version under the prefix at pod start) or exact versions (`NAME@vXXXXXXXX`),
    one per ensemble. Default both ensembles, the text one with its ONNX encoder (runs on any
    GPU; a `model_trt_python_<gpu>` archive must target `gpu_instance_type`'s GPU)."""

    def problems(self) -> list[str | Problem]:
        """The rules between the fields. Whether an archive must be one this repository builds
        depends on whether the models are named too: the construct's rule (``models``) and
        the settings' (which name none)."""
        out: list[str | Problem] = []
        if not 1 <= self.replicas <= self.gpu_nodes:
            out.append(
                Problem(
                    {"replicas": self.replicas},
                    f"expected 1 to gpu_nodes ({self.gpu_nodes}): each replica takes a whole "
                    "single-GPU node",
                )
            )
        elif self.max_surge and self.replicas + self.max_surge > self.gpu_nodes:
            out.append(
                Problem(
                    {"max_surge": self.max_surge},
                    f"expected replicas + max_surge <= gpu_nodes ({self.replicas} + "
                    f"{self.max_surge} > {self.gpu_nodes}): a surge pod needs a spare "
                    "single-GPU node",
                )
            )
        return out + self._archive_problems()

    def _archive_problems(self) -> list[str | Problem]:
        out: list[str | Problem] = [_Named({}, p) for p in ref_problems("archives", self.archives)]
        for i, archive in enumerate(self.archives):
            problem = gpu_problem(f"archives[{i}]", archive, self.gpu_instance_type)
            if problem:
                out.append(_Named({}, problem))
        logicals = [a.split("@")[0] for a in self.archives]
        twice = sorted({name for name in logicals if logicals.count(name) > 1})
        if twice:
            out.append(
                _Named(
                    {},
                    f"archives: {twice} named more than once (one version of an ensemble "
                    "per Triton server: their model names would clash)",
                )
            )
        return out
