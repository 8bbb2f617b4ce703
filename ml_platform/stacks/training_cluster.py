"""TrainingClusterStack: the EKS cluster and the cluster services training needs (device
plugins, Volcano, the FSx volume). The accelerator node groups are in stacks of their own."""

from __future__ import annotations

__all__ = [
    "BOOTSTRAP_CREATOR_ADMIN_WARNING",
    "NEURON_CHART_BY_VERSION_WARNING",
    "NO_CLUSTER_ADMIN_WARNING",
    "VOLCANO_CHART_BY_VERSION_WARNING",
    "ClusterChartValues",
    "TrainingClusterStack",
    "TritonValues",
    "cluster_charts",
]

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cdk8s
from aws_cdk import Annotations, CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from ml_platform.config import ClusterSettings, Settings, TrainingSettings, TritonOnEksSettings
from ml_platform.constructs._nag import acknowledge_each
from ml_platform.constructs.addons import PlatformAddons, PlatformAddonsProps
from ml_platform.constructs.dashboards import (
    TrainingDashboard,
    TrainingDashboardProps,
    nat_gateway_ids,
)
from ml_platform.constructs.eks_cluster import (
    TrainingEksCluster,
    TrainingEksClusterProps,
    as_icluster,
)
from ml_platform.constructs.storage import import_model_bucket
from ml_platform.constructs.triton_eks import TritonOnEks, TritonOnEksProps
from ml_platform.image_pins import DEFAULT_POLICY, ImagePolicy, warn_docker_hub, warn_tag_only
from ml_platform.k8s_charts import neuron as neuron_chart
from ml_platform.k8s_charts.efa import EfaDevicePluginChart
from ml_platform.k8s_charts.fsx_storage import TrainingStorageChart
from ml_platform.k8s_charts.network_policies import (
    SystemNetworkPolicyChart,
    TrainingNetworkPolicyChart,
)
from ml_platform.k8s_charts.training_namespace import TrainingNamespacePolicyChart
from ml_platform.k8s_charts.volcano import VolcanoQueueChart, volcano_helm_values
from ml_platform.props import shared_fields
from ml_platform.props.addons import PlatformAddonsPropsBase
from ml_platform.props.cluster import TrainingEksClusterPropsBase
from ml_platform.props.triton_eks import TritonOnEksPropsBase
from ml_platform.stack_outputs import TRAINING_DASHBOARD_OUTPUT
from ml_platform.training.images import TENSORBOARD_IMAGE
from ml_platform.versions import (
    NEURON_DEVICE_PLUGIN_IMAGE,
    NEURON_HELM_CHART,
    NEURON_HELM_CHART_VERSION,
    NEURON_HELM_REPOSITORY,
    VOLCANO_HELM_CHART,
    VOLCANO_HELM_CHART_VERSION,
    VOLCANO_HELM_REPOSITORY,
    VOLCANO_IMAGES,
    VOLCANO_NAMESPACE,
    efa_device_plugin_image,
)

NO_CLUSTER_ADMIN_WARNING = "ml-platform:noClusterAdmin"
BOOTSTRAP_CREATOR_ADMIN_WARNING = "ml-platform:bootstrapCreatorAdmin"
VOLCANO_CHART_BY_VERSION_WARNING = "ml-platform:volcanoChartByVersion"
NEURON_CHART_BY_VERSION_WARNING = "ml-platform:neuronChartByVersion"


@dataclass(frozen=True)
class ClusterChartValues:
    """What the cluster charts need from the settings besides the file system.

    Attributes:
        training: The ``training`` settings (namespace, Volcano queue).
        trainium_instance_type: Instance type of the Trainium nodes (the device plugins'
            node affinity, :meth:`neuron_helm_values`).
        fsx_storage_gib: The file system's size (the PersistentVolume's capacity).
        region: The stack's region (the EFA device plugin's regional image).
        images: Digests and mirrors of every image the cluster pulls. Default: none.
    """

    training: TrainingSettings
    trainium_instance_type: str
    fsx_storage_gib: int
    region: str
    images: ImagePolicy = DEFAULT_POLICY

    @classmethod
    def from_settings(cls, settings: Settings) -> ClusterChartValues:
        """The values of the platform's settings."""
        return cls(
            training=settings.training,
            trainium_instance_type=settings.trainium.instance_type,
            fsx_storage_gib=settings.storage.fsx_storage_gib,
            region=settings.env.region,
            images=settings.image_policy,
        )

    def neuron_helm_values(self) -> dict[str, Any]:
        """Values of Neuron's Helm release: its device plugin on the Trainium nodes."""
        return neuron_chart.neuron_helm_values([self.trainium_instance_type], images=self.images)


def cluster_charts(
    app: cdk8s.App,
    settings: Settings | ClusterChartValues,
    *,
    file_system_id: str,
    file_system_dns_name: str,
    file_system_mount_name: str,
) -> dict[str, cdk8s.Chart]:
    """Every cdk8s chart the training cluster applies, built into ``app``.

    Takes plain values, so tests can build a token-free copy with placeholders for the file
    system while the stack passes CDK tokens. ``settings``: the platform's settings or just
    the chart values.
    """
    values = (
        ClusterChartValues.from_settings(settings) if isinstance(settings, Settings) else settings
    )
    instance_types = [values.trainium_instance_type]
    images = values.images
    return {
        "Storage": TrainingStorageChart(
            app,
            "training-storage",
            namespace=values.training.namespace,
            file_system_id=file_system_id,
            dns_name=file_system_dns_name,
            mount_name=file_system_mount_name,
            storage_gib=values.fsx_storage_gib,
        ),
        # The Neuron device plugin itself is a Helm release (TrainingClusterStack._neuron).
        "NeuronPluginPolicies": neuron_chart.NeuronDevicePluginPolicyChart(
            app, "neuron-device-plugin-policies"
        ),
        "EfaPlugin": EfaDevicePluginChart(
            app,
            "efa-device-plugin",
            instance_types=instance_types,
            image=images.resolve(efa_device_plugin_image(values.region)),
        ),
        "VolcanoQueue": VolcanoQueueChart(app, "volcano-queue", queue=values.training.queue),
        "TrainingNamespacePolicy": TrainingNamespacePolicyChart(
            app,
            "training-namespace-policy",
            namespace=values.training.namespace,
            queue=values.training.queue,
        ),
        "TrainingNetworkPolicies": TrainingNetworkPolicyChart(
            app, "training-network-policies", namespace=values.training.namespace
        ),
        "SystemNetworkPolicies": SystemNetworkPolicyChart(app, "system-network-policies"),
    }


@dataclass(frozen=True)
class TritonValues:
    """Triton on the cluster (:class:`TritonOnEks`): its settings and what it takes from
    others.

    Attributes:
        settings: The ``triton_on_eks`` settings.
        triton_version: Triton release (``inference.triton_version``).
        model_prefix: Key prefix of the archives in the model bucket (``storage.model_prefix``).
        model_bucket_arn_export: Export name of the model bucket's ARN (StorageStack).
        model_bucket_key_arn_export: Export name of its key's ARN (``storage.model_bucket_kms``).
    """

    settings: TritonOnEksSettings
    triton_version: str
    model_prefix: str
    model_bucket_arn_export: str
    model_bucket_key_arn_export: str | None = None


class TrainingClusterStack(Stack):
    """Composes :class:`TrainingEksCluster`, :class:`PlatformAddons`, Volcano's Helm chart and
    the cluster charts. The accelerator node groups are in
    :mod:`ml_platform.stacks.accelerators`.

    Args:
        settings: The ``cluster`` settings. Required.
        charts: What the cluster charts need from the other settings
            (:meth:`ClusterChartValues.from_settings`). Required.
        vpc: The platform VPC. Required.
        trainium_subnet: Private subnet of the Trainium AZ, where FSx for Lustre is: the
            training-helper node group (``cluster.helper_nodes``) runs there, so the helper
            pods that mount the file system have a node in its AZ. Default none: no such group.
        file_system_id, file_system_dns_name, file_system_mount_name: The Lustre file system
            of StorageStack. Required.
        lustre_clients: The file system's client security group
            (``LustreStorage.client_security_group``). When given, the system nodes carry it
            (besides the cluster security group), so the helper pods that run there
            (TensorBoard, the dataset copy) can mount the file system; nothing else in the
            cluster security group can. Default none.
        legacy_lustre_security_group: The file system's own security group, when release
            0.1.0's rules that open it to the cluster security group are kept
            (``storage.lustre_legacy_rules``): the same four rules, same logical IDs, so an
            upgrade keeps them until the system nodes carry the client group. Default none.
        triton: Triton on the cluster, serving archives from the model bucket
            (``features.triton_on_eks``). Default none (no Triton on EKS).
        volcano_chart_dir: Folder of Volcano's chart as ``mlp charts fetch`` verified and
            unpacked it (``Chart.yaml`` at its root): deployed from the stack's asset bucket.
            Default none: the kubectl handler fetches the chart from the Helm repository by
            version at deploy time, and synthesis warns.
        neuron_chart_dir: The same for Neuron's chart (the Neuron device plugin). Default
            none: fetched from its OCI repository by version at deploy time, with a warning.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: ClusterSettings,
        charts: ClusterChartValues,
        vpc: ec2.IVpc,
        file_system_id: str,
        file_system_dns_name: str,
        file_system_mount_name: str,
        lustre_clients: ec2.ISecurityGroup | None = None,
        legacy_lustre_security_group: ec2.ISecurityGroup | None = None,
        trainium_subnet: ec2.ISubnet | None = None,
        triton: TritonValues | None = None,
        volcano_chart_dir: str | None = None,
        neuron_chart_dir: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        if settings.admin_role_arn is None:
            Annotations.of(self).add_warning_v2(
                NO_CLUSTER_ADMIN_WARNING,
                "cluster.admin_role_arn is not set: only the stack's kubectl provider can use "
                "the cluster's Kubernetes API (kubectl answers Unauthorized). Run `mlp azs "
                "--admin-role-arn ARN` (or `--admin-role-mine`) to record an admin role, or set "
                "cluster.admin_role_arn.",
            )
        if settings.bootstrap_creator_admin is None:
            Annotations.of(self).add_warning_v2(
                BOOTSTRAP_CREATOR_ADMIN_WARNING,
                "cluster.bootstrap_creator_admin is not set, so the cluster is created with "
                "BootstrapClusterCreatorAdminPermissions false. It is create-only: a cluster "
                "deployed by release 0.1.0 (created with true) would need replacing, which "
                f"CloudFormation refuses for the fixed name {settings.name!r}, and the update "
                "rolls back. Set cluster.bootstrap_creator_admin: true to keep a cluster "
                "deployed by 0.1.0, or false for a new one. CHANGELOG.md, 'Upgrading from 0.1.0', "
                "lists every setting and step an upgrade from 0.1.0 needs.",
            )
        self.eks = self._cluster(settings, vpc, lustre_clients, trainium_subnet)
        if legacy_lustre_security_group is not None:
            self._allow_legacy_lustre_clients(
                legacy_lustre_security_group, self.eks.cluster_security_group
            )
        cluster = as_icluster(self.eks.cluster)
        self.addons = self._addons(settings)

        # The Trainium and GPU node groups live in stacks of their own
        # (ml_platform.stacks.accelerators): a capacity failure must not roll back the cluster.

        # Kubernetes objects. Each chart is complete before it is attached (the manifest is
        # captured at attach time); the file system values stay tokens until deploy.
        self.charts = cluster_charts(
            cdk8s.App(),
            charts,
            file_system_id=file_system_id,
            file_system_dns_name=file_system_dns_name,
            file_system_mount_name=file_system_mount_name,
        )
        self.manifests = {
            name: cluster.add_cdk8s_chart(name, chart) for name, chart in self.charts.items()
        }
        images = charts.images
        self.neuron = self._neuron(cluster, neuron_chart_dir, charts)
        warn_tag_only(self.neuron, [NEURON_DEVICE_PLUGIN_IMAGE], images)
        warn_tag_only(self.manifests["EfaPlugin"], [efa_device_plugin_image(charts.region)], images)
        self.volcano = self._volcano(cluster, volcano_chart_dir, images)
        warn_tag_only(self.volcano, VOLCANO_IMAGES.values(), images)
        # Volcano's images and the workloads' TensorFlow image (TensorBoard, the dataset
        # Job's extract step) come from Docker Hub.
        warn_docker_hub(self.volcano, [*VOLCANO_IMAGES.values(), TENSORBOARD_IMAGE], images)
        self._order_cluster_services()

        self.triton: TritonOnEks | None = None
        if triton is not None:
            self.triton = self._triton(triton, images)

        self.dashboard = TrainingDashboard(
            self,
            "Dashboard",
            props=TrainingDashboardProps(
                cluster_name=cluster.cluster_name,
                namespace=charts.training.namespace,
                file_system_ids=(file_system_id,),
                nat_gateway_ids=tuple(nat_gateway_ids(vpc)) if isinstance(vpc, ec2.Vpc) else (),
            ),
        )
        self._outputs(settings.admin_role_arn)

    def _cluster(
        self,
        cfg: ClusterSettings,
        vpc: ec2.IVpc,
        lustre_clients: ec2.ISecurityGroup | None,
        trainium_subnet: ec2.ISubnet | None,
    ) -> TrainingEksCluster:
        shared = shared_fields(cfg, TrainingEksClusterPropsBase)
        return TrainingEksCluster(
            self,
            "Cluster",
            vpc=vpc,
            props=TrainingEksClusterProps(
                **shared,
                cluster_name=cfg.name,
                bootstrap_creator_admin=bool(cfg.bootstrap_creator_admin),
            ),
            helper_subnet=trainium_subnet,
            system_node_security_groups=[lustre_clients] if lustre_clients is not None else [],
        )

    def _addons(self, cfg: ClusterSettings) -> PlatformAddons:
        addons = PlatformAddons(
            self,
            "Addons",
            cluster=as_icluster(self.eks.cluster),
            props=PlatformAddonsProps(
                **shared_fields(cfg, PlatformAddonsPropsBase),
                kubernetes_version=cfg.kubernetes_version,
                addon_versions=cfg.addon_versions,
            ),
            nodes_ready=[self.eks.system_nodes],
        )
        for group in self.eks.system_node_groups:
            group.node.add_dependency(*addons.node_dependents())
        # On a cluster deployed before the VPC CNI had its own role, the system node role loses
        # AmazonEKS_CNI_Policy only after the add-on (and its Pod Identity association) is
        # updated.
        self.eks.system_nodes.role.node.add_dependency(addons.addons["vpc-cni"])
        return addons

    def _order_cluster_services(self) -> None:
        """Create order between Volcano, the add-ons and the charts."""
        # Volcano's pods need the system nodes and DNS; the Queue needs Volcano's CRD and
        # admission webhook.
        self.volcano.node.add_dependency(self.eks.system_nodes, self.addons.addons["coredns"])
        self.manifests["VolcanoQueue"].node.add_dependency(self.volcano)
        # The policies live in the training namespace the storage chart creates.
        self.manifests["TrainingNetworkPolicies"].node.add_dependency(self.manifests["Storage"])
        # Strict NetworkPolicy enforcement: the system namespaces' allow-all policies (and the
        # volcano-system and amazon-cloudwatch namespaces) exist before the pods that need
        # them, so none starts with no traffic at all.
        system_policies = self.manifests["SystemNetworkPolicies"]
        self.volcano.node.add_dependency(system_policies)
        for name in ("coredns", "aws-fsx-csi-driver", "amazon-cloudwatch-observability"):
            self.addons.addons[name].node.add_dependency(system_policies)
        for name in ("NeuronPluginPolicies", "EfaPlugin"):
            self.manifests[name].node.add_dependency(system_policies)
        # The plugin never runs without the policies that narrow its service account.
        self.neuron.node.add_dependency(system_policies, self.manifests["NeuronPluginPolicies"])

    def _triton(self, triton: TritonValues, images: ImagePolicy) -> TritonOnEks:
        cfg = triton.settings
        return TritonOnEks(
            self,
            "Triton",
            cluster=as_icluster(self.eks.cluster),
            bucket=import_model_bucket(
                self,
                "ModelBucket",
                triton.model_bucket_arn_export,
                triton.model_bucket_key_arn_export,
            ),
            model_prefix=triton.model_prefix,
            pod_identity_agent=self.addons.addons["eks-pod-identity-agent"],
            props=TritonOnEksProps(
                **shared_fields(cfg, TritonOnEksPropsBase),
                triton_version=triton.triton_version,
                gpu_node_group=False,  # GpuNodesStack
                images=images,
            ),
        )

    def _outputs(self, admin_role_arn: str | None) -> None:
        cluster = as_icluster(self.eks.cluster)
        CfnOutput(
            self,
            TRAINING_DASHBOARD_OUTPUT,
            value=self.dashboard.url,
            description="CloudWatch dashboard of the training cluster (nodes, Neuron, EFA, FSx)",
        )
        CfnOutput(self, "ClusterName", value=cluster.cluster_name)
        if self.eks.kubectl_provider_guard is not None:
            CfnOutput(
                self,
                "KubectlProviderGuardPolicyArn",
                value=self.eks.kubectl_provider_guard.managed_policy_arn,
                description="Attach to every role that is not a cluster administrator",
            )
        CfnOutput(self, "ClusterArn", value=cluster.cluster_arn)
        CfnOutput(
            self,
            "KubectlRoleArn",
            value=_kubectl_role(cluster).role_arn,
            description="Role of the stack's kubectl provider (cluster-admin)",
        )
        kubeconfig_outputs(self, cluster.cluster_name, admin_role_arn)

    def _volcano(
        self, cluster: eks.ICluster, chart_dir: str | None, images: ImagePolicy
    ) -> eks.HelmChart:
        """Volcano's Helm release, from the verified chart asset when there is one."""
        return self._helm_release(
            cluster,
            "Volcano",
            chart_dir=chart_dir,
            chart_dir_prop="volcano_chart_dir",
            repository=VOLCANO_HELM_REPOSITORY,
            chart=VOLCANO_HELM_CHART,
            version=VOLCANO_HELM_CHART_VERSION,
            release="volcano",
            namespace=VOLCANO_NAMESPACE,
            values=volcano_helm_values(images=images),
            warning=(
                VOLCANO_CHART_BY_VERSION_WARNING,
                f"Volcano's Helm chart {VOLCANO_HELM_CHART_VERSION} is fetched from "
                f"{VOLCANO_HELM_REPOSITORY} by version at deploy time, unverified (its hooks run "
                "with cluster-admin). Run `mlp charts fetch` to verify it against its pinned "
                "SHA-256 and ship it as the chart's asset.",
            ),
        )

    def _neuron(
        self, cluster: eks.ICluster, chart_dir: str | None, charts: ClusterChartValues
    ) -> eks.HelmChart:
        """Neuron's Helm release (the Neuron device plugin), from the verified chart asset when
        there is one. In kube-system, beside 0.1.0's hand-written plugin under other names."""
        return self._helm_release(
            cluster,
            "Neuron",
            chart_dir=chart_dir,
            chart_dir_prop="neuron_chart_dir",
            repository=NEURON_HELM_REPOSITORY,
            chart=NEURON_HELM_CHART,
            version=NEURON_HELM_CHART_VERSION,
            release=neuron_chart.RELEASE,
            namespace=neuron_chart.RELEASE_NAMESPACE,
            values=charts.neuron_helm_values(),
            warning=(
                NEURON_CHART_BY_VERSION_WARNING,
                f"Neuron's Helm chart {NEURON_HELM_CHART_VERSION} is fetched from "
                f"{NEURON_HELM_REPOSITORY} by version at deploy time, unverified (the kubectl "
                "handler installs it with cluster-admin). Run `mlp charts fetch` to verify it "
                "against its pinned digest and ship it as the chart's asset.",
            ),
        )

    def _helm_release(
        self,
        cluster: eks.ICluster,
        construct_id: str,
        *,
        chart_dir: str | None,
        chart_dir_prop: str,
        repository: str,
        chart: str,
        version: str,
        release: str,
        namespace: str,
        values: dict[str, Any],
        warning: tuple[str, str],
    ) -> eks.HelmChart:
        """A Helm release from the verified chart folder (``mlp charts fetch``) as an asset, or
        else from ``repository`` by ``version`` with the ``warning`` (id, message)."""
        if chart_dir is None:
            helm_chart = cluster.add_helm_chart(
                construct_id,
                repository=repository,
                chart=chart,
                version=version,
                release=release,
                namespace=namespace,
                create_namespace=True,
                values=values,
                wait=True,
            )
            Annotations.of(helm_chart).add_warning_v2(*warning)
            return helm_chart
        if not Path(chart_dir, "Chart.yaml").is_file():
            raise ValueError(
                f"{self.node.path}: {chart_dir_prop}={chart_dir!r}: no Chart.yaml there; run "
                "`mlp charts fetch`"
            )
        # The kubectl handler downloads the asset (the folder, zipped), unzips it and runs helm
        # on that folder (get_chart_asset_from_url in aws-cdk's
        # https://github.com/aws/aws-cdk/blob/main/packages/@aws-cdk/custom-resource-handlers/lib/aws-eks-v2/kubectl-handler/helm/__init__.py);
        # HelmChart grants the handler's role read on the asset bucket.
        asset = s3_assets.Asset(self, f"{construct_id}Chart", path=chart_dir)
        helm_chart = cluster.add_helm_chart(
            construct_id,
            chart_asset=asset,
            release=release,
            namespace=namespace,
            create_namespace=True,
            values=values,
            wait=True,
        )
        objects = Stack.of(self).resolve(asset.bucket.arn_for_objects("*"))
        kubectl_role = _kubectl_role(cluster)
        acknowledge_each(
            kubectl_role,
            {
                f"AwsSolutions-IAM5[Resource::{objects}]": (
                    "aws-cdk's HelmChart grants the kubectl handler read on the CDK asset "
                    "bucket's objects, to download the verified Helm chart assets."
                ),
                **{
                    f"AwsSolutions-IAM5[Action::{action}]": (
                        "Part of aws-cdk's read grant (Bucket.grantRead) on the CDK asset "
                        "bucket, for the verified Helm chart assets."
                    )
                    for action in ("s3:GetObject*", "s3:GetBucket*", "s3:List*")
                },
            },
        )
        return helm_chart

    def _allow_legacy_lustre_clients(
        self, lustre: ec2.ISecurityGroup, clients: ec2.ISecurityGroup
    ) -> None:
        """Release 0.1.0's rules from the cluster security group to the file system (its
        ``_allow_lustre_clients``), kept for one release: the construct IDs, and so the
        logical IDs, are 0.1.0's."""
        from ml_platform.constructs.storage import LUSTRE_PORTS

        rules = Construct(self, "LustreClients")
        for i, port in enumerate(LUSTRE_PORTS):
            rule = port.to_rule_json()
            fields = dict(
                ip_protocol=rule["ipProtocol"], from_port=rule["fromPort"], to_port=rule["toPort"]
            )
            ec2.CfnSecurityGroupIngress(
                rules,
                f"Ingress{i}",
                group_id=lustre.security_group_id,
                source_security_group_id=clients.security_group_id,
                description="Lustre clients: cluster-group nodes",
                **fields,
            )
            ec2.CfnSecurityGroupEgress(
                rules,
                f"Egress{i}",
                group_id=lustre.security_group_id,
                destination_security_group_id=clients.security_group_id,
                description="Lustre replies to cluster-group nodes",
                **fields,
            )
        # A new system node group (carrying the cluster group) waits for its rules, as it
        # does for every other rule of its groups (tests/app/test_create_order.py).
        for group in self.eks.system_node_groups:
            group.node.add_dependency(rules)


def _kubectl_role(cluster: eks.ICluster) -> iam.IRole:
    """The role of the cluster's kubectl provider (a cluster of this stack has one)."""
    provider = cluster.kubectl_provider
    if provider is None or provider.role is None:
        raise ValueError(f"{cluster.node.path}: the cluster has no kubectl provider role")
    return provider.role


def kubeconfig_outputs(stack: Stack, cluster_name: str, admin_role_arn: str | None) -> None:
    """``UpdateKubeconfigCommand`` and, with an admin role, ``AdminRoleArn``.

    The command carries no ``--role-arn``: ``mlp azs`` writes the caller's own role as
    ``admin_role_arn``, and asking the CLI to assume the role its credentials already are
    fails unless that role trusts itself. Whoever runs with other credentials adds
    ``--role-arn`` with the ``AdminRoleArn`` output.
    """
    CfnOutput(
        stack,
        "UpdateKubeconfigCommand",
        value=f"aws eks update-kubeconfig --name {cluster_name} --region {stack.region}",
    )
    if admin_role_arn:
        CfnOutput(
            stack,
            "AdminRoleArn",
            value=admin_role_arn,
            description="Role with cluster-admin: add --role-arn with it to the update-kubeconfig "
            "command when your credentials are not already this role",
        )
