"""The fields :class:`~ml_platform.constructs.sagemaker_mme.TritonMultiModelEndpointProps`
shares with the settings: per endpoint (:class:`TritonEndpointPropsBase`, the base of
``inference.endpoints[]``) and per Triton server (:class:`TritonServerPropsBase`, the base of
``inference``), with their rules."""

from dataclasses import dataclass
from typing import Annotated

import annotated_types

from ml_platform import limits
from ml_platform._settings_parse import Allowed, Between, Matches, OneOf, Problem, Section, setting
from ml_platform.instances import SAGEMAKER_MME_GPU_INSTANCES
from ml_platform.sagemaker_images import (
    DEFAULT_INFERENCE_AMI_VERSION,
    DEFAULT_TRITON_VERSION,
    INFERENCE_AMI_VERSIONS,
    TRITON_VERSIONS,
    inference_ami_problem,
)
from ml_platform.triton.archive_names import ArchiveRef, parse_ref
from ml_platform.triton.kinds import DEFAULT_ENDPOINT_ARCHIVES
from ml_platform.triton.targets import gpu_mismatch

__all__ = ["TritonEndpointPropsBase", "TritonMultiModelEndpointPropsBase", "TritonServerPropsBase"]


@dataclass(frozen=True, kw_only=True)
class TritonEndpointPropsBase(Section):
    """One SageMaker multi-model endpoint serving Triton ensembles."""

    name: Annotated[str, Matches(limits.ENDPOINT_NAME)] = setting("triton-ensembles")
    """Endpoint name (clients and scaling refer to it). In the settings, unique regardless of
    case, and no two names may map to one construct id (`triton-ensembles`,
    `tritonEnsembles`, `triton--ensembles`)."""
    instance_type: Annotated[
        str,
        OneOf(tuple(sorted(SAGEMAKER_MME_GPU_INSTANCES))),
        Allowed(f"multi-model endpoints on GPU support {sorted(SAGEMAKER_MME_GPU_INSTANCES)}"),
    ] = setting(limits.DEFAULT_ENDPOINT_INSTANCE_TYPE)
    """A single-GPU instance type that multi-model endpoints on GPU support (the default: T4,
    as in the source design)."""
    initial_instances: int = setting(
        limits.DEFAULT_INITIAL_INSTANCES,
        minimum=limits.ENDPOINT_INSTANCES.low,
        maximum=limits.ENDPOINT_INSTANCES.high,
    )
    """Instances at creation: `1 <= min_instances <= initial_instances <= max_instances <=
    100`."""
    min_instances: int = setting(
        limits.DEFAULT_MIN_INSTANCES,
        minimum=limits.ENDPOINT_INSTANCES.low,
        maximum=limits.ENDPOINT_INSTANCES.high,
    )
    """Fewest instances autoscaling keeps. Below 2, synthesis warns
    (`ml-platform:endpointSingleInstance`): one instance is one Availability Zone."""
    max_instances: int = setting(
        limits.DEFAULT_MAX_INSTANCES,
        minimum=limits.ENDPOINT_INSTANCES.low,
        maximum=limits.ENDPOINT_INSTANCES.high,
    )
    """Most instances autoscaling adds."""
    invocations_per_instance: Annotated[int, Between(limits.INVOCATIONS_PER_INSTANCE)] = setting(
        limits.DEFAULT_INVOCATIONS_PER_INSTANCE
    )
    """Scaling target for SageMakerVariantInvocationsPerInstance (per minute)."""
    archives: tuple[str, ...] = setting(DEFAULT_ENDPOINT_ARCHIVES, minItems=1, uniqueItems=True)
    """Archives this endpoint serves, each a logical name (`model_tf_dali`: every version, the
    newest for `mlp invoke`) or an exact version (`model_tf_dali@v1a2b3c4d`), as `mlp models
    package` names them; distinct. Default both ensembles of the source design, the text one
    with its T4 plan. An archive with a TensorRT plan (`model_trt_python_<gpu>`) must target
    the instance type's GPU. They scope `grant_invoke` and `mlp` commands; they are not written
    into the template."""

    @property
    def archive_refs(self) -> tuple[ArchiveRef, ...]:
        """``archives`` parsed (once :meth:`problems` finds no fault with them)."""
        return tuple(parse_ref(a) for a in self.archives)

    def problems(self) -> list[str | Problem]:
        out: list[str | Problem] = []
        # aws-cdk's ScalableTarget (aws-cdk-lib 2.275, aws-applicationautoscaling/lib/
        # scalable-target.js) refuses only min < 0 and max < min; the endpoint's resources are
        # L1 (no L2 for multi-model endpoints) and check nothing. So the rule stays whole here:
        # initial_instances, the lower bound 1 and SageMaker's 100 are no one else's.
        if not limits.endpoint_counts_ok(
            self.min_instances, self.initial_instances, self.max_instances
        ):
            counts = {
                "min_instances": self.min_instances,
                "initial_instances": self.initial_instances,
                "max_instances": self.max_instances,
            }
            most = limits.ENDPOINT_INSTANCES.high
            out.append(Problem(counts, f"expected 1 <= min <= initial <= max <= {most}"))
        if not self.archives:
            out.append(Problem({"archives": []}, "expected at least one archive"))
        refs = []
        for i, archive in enumerate(self.archives):
            try:
                refs.append(parse_ref(archive))
            except ValueError as error:
                out.append(Problem({f"archives[{i}]": archive}, str(error)))
        duplicates = sorted({str(r) for r in refs if refs.count(r) > 1})
        if duplicates:
            out.append(
                Problem({"archives": list(self.archives)}, f"{duplicates} given more than once")
            )
        for i, archive in enumerate(self.archives):
            mismatch = gpu_mismatch(archive, self.instance_type)
            if mismatch:
                out.append(Problem({f"archives[{i}]": archive}, mismatch))
        return out


@dataclass(frozen=True, kw_only=True)
class TritonServerPropsBase(Section):
    """The Triton server of SageMaker multi-model endpoints: its release, the instances' AMI and
    how the container runs."""

    triton_version: Annotated[str, OneOf(TRITON_VERSIONS)] = setting(DEFAULT_TRITON_VERSION)
    """Tag of SageMaker's Triton container (`<ver>-py3`); Triton on EKS runs the same release
    from NGC. The default is patched against NVIDIA's August 2025 bulletin
    (CVE-2025-23319/23320/23334, fixed in 25.07); why it is not 26.05:
    docs/serving-sagemaker.md "The Triton release". Older releases stay selectable for their
    TensorFlow backend, with a synth-time warning naming the CVEs
    (`ml-platform:triton-unpatched-release`, acknowledgeable); releases from 25.03 refuse
    `ml.p3` (V100) endpoints; each release is published in its own regions (the SageMaker
    SDK's list), and a region without it is refused."""
    inference_ami_version: Annotated[str, OneOf(INFERENCE_AMI_VERSIONS)] = setting(
        DEFAULT_INFERENCE_AMI_VERSION
    )
    """The endpoint instances' AMI (NVIDIA driver and CUDA). The default (driver 580, CUDA
    13.0) runs the CUDA 13 of releases from 25.08 natively and every older release too. A
    535/550 AMI without the CUDA-compat mount cannot run a CUDA 13 release and is refused."""
    network_isolation: bool = setting(True)
    """`EnableNetworkIsolation` on each endpoint's model: the container (and the archives'
    Python) has no network; SageMaker itself fetches the archives."""
    instance_type_changes: bool = setting(True)
    """Let an endpoint's `instance_type` change deploy although autoscaling is registered on
    it (SageMaker refuses that update otherwise): a small Lambda-backed custom resource per
    endpoint deregisters the target before the endpoint moves and registers it again after.
    False: no Lambda; an instance-type change then needs SageMaker's manual steps
    (https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html)."""
    triton_log_verbose: Annotated[
        int, annotated_types.Ge(0), Allowed(limits.TRITON_LOG_VERBOSE_TEXT)
    ] = setting(0)
    """Triton's `--log-verbose` level on the endpoints (the SageMaker container's
    `SAGEMAKER_TRITON_LOG_VERBOSE`). 0: off, and INFO lines off too
    (`SAGEMAKER_TRITON_LOG_INFO=false`: the front end logs one per request), leaving warnings
    and errors, failed loads among them (the container's own default logs every request)."""
    model_load_gpu_limit_percent: Annotated[int, Between(limits.MODEL_LOAD_GPU_LIMIT_PERCENT)] = (
        setting(limits.DEFAULT_MODEL_LOAD_GPU_LIMIT_PERCENT)
    )
    """Opt-in cap on model loads: Triton refuses to load another model once the GPU's memory
    use passes this share (`--model-load-gpu-limit`, through the container's
    `SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT`). Default 100: no cap, so a full GPU fails the load
    on CUDA memory, the endpoint answers SageMaker 507 and SageMaker unloads idle models to make
    room. What a cap costs: a load past it answers 400, not 507, so SageMaker evicts nothing and
    every new archive fails (the load-failure alarm fires) until models are unloaded otherwise;
    synthesis warns about it (`ml-platform:modelLoadGpuLimitBlocksEviction`). 1 to 100."""

    def problems(self) -> list[str | Problem]:
        problem = inference_ami_problem(self.triton_version, self.inference_ami_version)
        if problem is None:
            return []
        versions = {
            "triton_version": self.triton_version,
            "inference_ami_version": self.inference_ami_version,
        }
        return [Problem(versions, problem)]


@dataclass(frozen=True, kw_only=True)
class TritonMultiModelEndpointPropsBase(TritonEndpointPropsBase, TritonServerPropsBase):
    """Both sets of fields, for one endpoint construct, checked in one pass.

    Its cross-field rules are the endpoint's only: the server's (the AMI must run the release's
    CUDA) and the release's minimum GPU compute capability hold for SageMaker's Triton image,
    so the construct checks them unless it is given its own image (``image_uri``)."""

    def problems(self) -> list[str | Problem]:
        return TritonEndpointPropsBase.problems(self)
