"""Builds the whole platform into a CDK app: the one place stacks are wired together."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import aws_cdk as cdk

from ml_platform._cdk_nag import AwsSolutionsChecks
from ml_platform.config import CONTEXT_KEY, Settings
from ml_platform.constructs._model_upload import upload_role_name
from ml_platform.constructs.eks_cluster import as_icluster
from ml_platform.stack_outputs import (
    TRAINING_CLUSTER_STACK,
    endpoint_groups,
    inference_stack_short,
)
from ml_platform.stacks.accelerators import AcceleratorNodesStack, GpuNodesStack, TrainiumNodesStack
from ml_platform.stacks.inference import InferenceStack
from ml_platform.stacks.network import NetworkStack
from ml_platform.stacks.storage import StorageStack
from ml_platform.stacks.training_cluster import (
    ClusterChartValues,
    TrainingClusterStack,
    TritonValues,
)
from ml_platform.training.jobs import bert_nodes


class _AppContext(Mapping[str, Any]):
    """Read-only view of an app's context, as the settings parser reads it: a key whose value
    is ``None`` (or that is not set) is missing."""

    def __init__(self, app: cdk.App) -> None:
        self._app = app

    def __getitem__(self, key: str) -> Any:
        value = self._app.node.try_get_context(key)
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._app.node.get_all_context())

    def __len__(self) -> int:
        return len(self._app.node.get_all_context())


def new_app(**kwargs: Any) -> cdk.App:
    """A CDK app as the platform synthesizes it (``app.py`` and the tests use this).

    aws-cdk-lib's built-in CloudFormation validation (a WASM engine run at every synth) is
    switched off: it costs about 3 s per synth, more than the rest of an empty app, and it only
    warns. Every template is gated by cfn-lint in the test suite instead (zero errors and
    warnings), and cdk-nag still runs as a validation plugin.

    Construct stack traces are off (``stack_traces=False`` unless given): in a Python app they
    point into jsii's bundled ``program.js``, so the CDK CLI printed a meaningless
    ``/tmp/.../program.js:1:5591`` line above every warning.
    """
    kwargs.setdefault("stack_traces", False)
    return cdk.App(builtin_cloud_formation_validation=False, **kwargs)


def settings_from_app(app: cdk.App) -> Settings:
    """Parse the app's ``ml-platform`` context (a JSON string when given with ``-c``, which
    :meth:`Settings.from_context` parses; text that is not a JSON object is a SettingsError)."""
    raw = app.node.try_get_context(CONTEXT_KEY)
    return Settings.from_context(raw, known_azs=_AppContext(app))


@dataclass
class Platform:
    """The stacks of one platform; optional ones are ``None`` when switched off."""

    app: cdk.App
    settings: Settings
    network: NetworkStack
    storage: StorageStack
    inference: InferenceStack | None = None
    training_cluster: TrainingClusterStack | None = None
    trainium_nodes: TrainiumNodesStack | None = None
    gpu_nodes: GpuNodesStack | None = None
    #: Every inference stack: ``inference`` first, then ``<prefix>-Inference2`` ... when there
    #: are more endpoints than one stack holds.
    inference_stacks: list[InferenceStack] = field(default_factory=list)

    @property
    def stacks(self) -> list[cdk.Stack]:
        optional = (
            *self.inference_stacks,
            self.training_cluster,
            self.trainium_nodes,
            self.gpu_nodes,
        )
        return [s for s in (self.network, self.storage, *optional) if s is not None]


def build_platform(
    app: cdk.App,
    settings: Settings,
    *,
    nag: bool = True,
    volcano_chart_dir: str | None = None,
    neuron_chart_dir: str | None = None,
) -> Platform:
    """Add every stack the settings ask for to ``app``.

    Args:
        nag: Run cdk-nag's AwsSolutions pack as a policy-validation plugin: synthesis fails on
            any finding that is not acknowledged next to the code it concerns.
        volcano_chart_dir: Volcano's verified chart folder (``mlp charts fetch``), deployed as
            the chart's asset. Default none: fetched from the Helm repository by version at
            deploy time, with a synth warning. ``app.py`` passes the folder when it exists.
        neuron_chart_dir: The same for Neuron's chart (the Neuron device plugin).
    """
    env = cdk.Environment(account=settings.env.account, region=settings.env.region)
    prefix = settings.env.stack_prefix
    network = _network_stack(app, settings, env)
    storage = _storage_stack(app, settings, network, env)
    platform = Platform(app=app, settings=settings, network=network, storage=storage)
    if settings.features.inference:
        groups = endpoint_groups(settings.inference.endpoints)
        for i, endpoints in enumerate(groups):
            stack = InferenceStack(
                app,
                f"{prefix}-{inference_stack_short(i)}",
                settings=settings.inference,
                endpoints=endpoints,
                upload=i == 0,
                removal_policy=_removal_policy(settings.storage.removal_policy),
                bucket_arn_export=storage.model_bucket_arn_export,
                bucket_key_arn_export=storage.model_bucket_key_arn_export,
                model_prefix=settings.storage.model_prefix,
                env=env,
                description="cdk-ml-platform: Triton ensembles on SageMaker multi-model endpoints"
                + (f" ({i + 1} of {len(groups)})" if len(groups) > 1 else ""),
            )
            stack.add_stack_dependency(storage)
            if i:  # the first stack uploads upload_dir's archives before any endpoint starts
                stack.add_stack_dependency(platform.inference_stacks[0])
            platform.inference_stacks.append(stack)
        platform.inference = platform.inference_stacks[0]
    if settings.features.training_cluster:
        _add_training_cluster(platform, volcano_chart_dir, neuron_chart_dir, env)
    for each in platform.stacks:
        cdk.Tags.of(each).add("project", "cdk-ml-platform")
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return platform


def _network_stack(app: cdk.App, settings: Settings, env: cdk.Environment) -> NetworkStack:
    # Teardown: `cdk destroy --all` ends cleanly with the defaults. The Storage stack retains
    # its resources (file system, its security groups and rules, bucket, registry), so it
    # needs no termination protection to keep the data; the Network stack then retains the
    # VPC and the subnet that still hold the file system's interfaces and groups
    # (aws/aws-cdk#31521). docs/runbook.md "Tear down" lists what is left and how to delete it.
    return NetworkStack(
        app,
        f"{settings.env.stack_prefix}-Network",
        settings=settings.network,
        env=env,
        keep_trainium_subnet=settings.storage.removal_policy == "retain",
        description="cdk-ml-platform: VPC and training-node security group",
    )


def _removal_policy(setting: str) -> cdk.RemovalPolicy:
    """``storage.removal_policy`` as a CDK policy: ``retain`` keeps the resource on deletion
    and removes it only when its first create fails (``RetainExceptOnCreate``)."""
    if setting == "destroy":
        return cdk.RemovalPolicy.DESTROY
    return cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE


def _storage_stack(
    app: cdk.App, settings: Settings, network: NetworkStack, env: cdk.Environment
) -> StorageStack:
    prefix = settings.env.stack_prefix
    return StorageStack(
        app,
        f"{prefix}-Storage",
        settings=settings.storage,
        image_repository_name=settings.training.image_repository,
        vpc=network.vpc,
        trainium_subnet=network.trainium_subnet,
        archive_publishers=settings.archive_publishers,
        bucket_administrators=(
            (settings.cluster.admin_role_arn,) if settings.cluster.admin_role_arn else ()
        ),
        upload_role_name=(
            upload_role_name(f"{prefix}-Inference", settings.env.region)
            if settings.features.inference and settings.inference.upload_dir
            else None
        ),
        # Every node of the BERT jobs reads the dataset at once.
        lustre_readers=bert_nodes(settings) if settings.features.training_cluster else 0,
        # Release 0.1.0's Lustre rules, until the upgraded nodes carry the client group.
        legacy_lustre_clients=(
            [network.training_nodes.security_group]
            if settings.storage.lustre_legacy_rules and settings.features.training_cluster
            else []
        ),
        env=env,
        description="cdk-ml-platform: stateful storage (ECR, model bucket, FSx for Lustre)",
    )


def _add_training_cluster(
    platform: Platform,
    volcano_chart_dir: str | None,
    neuron_chart_dir: str | None,
    env: cdk.Environment,
) -> None:
    """The cluster's stack and, in stacks of their own, its accelerator node groups."""
    app, settings, network, storage = (
        platform.app,
        platform.settings,
        platform.network,
        platform.storage,
    )
    file_system = storage.lustre.file_system
    cluster_stack = TrainingClusterStack(
        app,
        f"{settings.env.stack_prefix}-{TRAINING_CLUSTER_STACK}",
        settings=settings.cluster,
        charts=ClusterChartValues.from_settings(settings),
        vpc=network.vpc,
        file_system_id=file_system.file_system_id,
        file_system_dns_name=file_system.dns_name,
        file_system_mount_name=file_system.mount_name,
        lustre_clients=storage.lustre.client_security_group,
        legacy_lustre_security_group=(
            storage.lustre.security_group if settings.storage.lustre_legacy_rules else None
        ),
        trainium_subnet=network.trainium_subnet,
        triton=(
            TritonValues(
                settings=settings.triton_on_eks,
                triton_version=settings.inference.triton_version,
                model_prefix=settings.storage.model_prefix,
                model_bucket_arn_export=storage.model_bucket_arn_export,
                model_bucket_key_arn_export=storage.model_bucket_key_arn_export,
            )
            if settings.features.triton_on_eks
            else None
        ),
        volcano_chart_dir=volcano_chart_dir,
        neuron_chart_dir=neuron_chart_dir,
        env=env,
        description="cdk-ml-platform: EKS training cluster with Trainium nodes over EFA",
    )
    cluster_stack.add_stack_dependency(storage)
    platform.training_cluster = cluster_stack
    for stack in _accelerator_stacks(platform, cluster_stack, env):
        if isinstance(stack, TrainiumNodesStack):
            platform.trainium_nodes = stack
        elif isinstance(stack, GpuNodesStack):
            platform.gpu_nodes = stack


def _accelerator_stacks(
    platform: Platform, cluster_stack: TrainingClusterStack, env: cdk.Environment
) -> list[AcceleratorNodesStack]:
    """Accelerator node groups in stacks of their own: an InsufficientInstanceCapacity failure
    rolls back only that stack, and `cdk deploy <stack>` can be retried. Each depends on the
    cluster's stack, never the reverse."""
    settings = platform.settings
    wanted: list[tuple[type[AcceleratorNodesStack], dict[str, Any]]] = [
        (
            TrainiumNodesStack,
            {
                "settings": settings.trainium,
                "trainium_subnet": platform.network.trainium_subnet,
                "training_nodes": platform.network.training_nodes.security_group,
                "lustre_clients": platform.storage.lustre.client_security_group,
                "kubernetes_version": settings.cluster.kubernetes_version,
            },
        )
    ]
    if cluster_stack.triton is not None:
        wanted.append((GpuNodesStack, {"settings": settings.triton_on_eks}))
    stacks = []
    for stack_class, props in wanted:
        stack = stack_class(
            platform.app,
            f"{settings.env.stack_prefix}-{stack_class.SHORT_NAME}",
            cluster=as_icluster(cluster_stack.eks.cluster),
            nodes_ready_after=cluster_stack.addons.node_dependents(),
            node_ssm_access=settings.cluster.node_ssm_access,
            env=env,
            description=stack_class.DESCRIPTION,
            **props,
        )
        stack.add_stack_dependency(cluster_stack)
        stacks.append(stack)
    return stacks
