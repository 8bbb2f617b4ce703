"""Least privilege inside the cluster: NetworkPolicies (evaluated, not only shaped), their
enforcement in the VPC CNI, IMDS hop limit 1, scoped Pod Identity trust, and the
securityContext of every pod we emit."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import cdk8s
import kubernetes_validate
import pytest

from ml_platform.k8s_charts.network_policies import (
    METRICS_SCRAPER_NAMESPACE,
    NAMESPACE_NAME_LABEL,
    TRITON_CLIENT_LABEL,
    TrainingNetworkPolicyChart,
)
from ml_platform.k8s_charts.triton import TritonChart, TritonChartProps
from ml_platform.triton.ensembles import TEXT_ARCHIVE
from tests.support import SynthesizedPlatform

KUBERNETES = "1.35.0"
TRITON_POD = {"app.kubernetes.io/name": "triton", "app.kubernetes.io/part-of": "ml-platform"}
DNS_POD = {"k8s-app": "kube-dns"}


def ns(name: str, **labels: str) -> dict[str, str]:
    return {NAMESPACE_NAME_LABEL: name, **labels}


# -- a small NetworkPolicy evaluator (Kubernetes semantics: a pod selected by any policy of a
#    direction is isolated in it; traffic is allowed when some rule of those policies matches)


def _selects(selector: dict | None, labels: dict[str, str]) -> bool:
    if selector is None:
        return True
    assert set(selector) <= {"matchLabels"}, selector  # the policies use matchLabels only
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _peer_matches(peer: dict, own_ns: str, other: dict[str, Any]) -> bool:
    if "ipBlock" in peer:
        if "ip" not in other:
            return False
        ip = ipaddress.ip_address(other["ip"])
        block = peer["ipBlock"]
        return ip in ipaddress.ip_network(block["cidr"]) and not any(
            ip in ipaddress.ip_network(e) for e in block.get("except", [])
        )
    if "ns" not in other:
        return False
    if "namespaceSelector" in peer:
        ns_ok = _selects(peer["namespaceSelector"], other["ns"])
    else:
        ns_ok = other["ns"][NAMESPACE_NAME_LABEL] == own_ns
    return ns_ok and _selects(peer.get("podSelector"), other["pod"])


def _port_matches(ports: list | None, port: int, protocol: str) -> bool:
    return ports is None or any(
        p.get("protocol", "TCP") == protocol and p.get("port") in (None, port) for p in ports
    )


def allowed(
    policies: list[dict],
    direction: str,
    pod: dict[str, str],
    other: dict,
    port: int,
    protocol: str = "TCP",
) -> bool:
    """Whether ``pod`` (in the policies' namespace) may receive from / send to ``other``."""
    kind, rules_key, peers_key = {
        "ingress": ("Ingress", "ingress", "from"),
        "egress": ("Egress", "egress", "to"),
    }[direction]
    selecting = [
        p
        for p in policies
        if kind in p["spec"].get("policyTypes", ["Ingress"])
        and _selects(p["spec"]["podSelector"], pod)
    ]
    if not selecting:
        return True
    for policy in selecting:
        own = policy["metadata"]["namespace"]
        for rule in policy["spec"].get(rules_key, []):
            peers = rule.get(peers_key)
            if (
                peers is None or any(_peer_matches(x, own, other) for x in peers)
            ) and _port_matches(rule.get("ports"), port, protocol):
                return True
    return False


@pytest.fixture(scope="module")
def triton_policies() -> list[dict]:
    chart = TritonChart(
        cdk8s.App(),
        "t",
        props=TritonChartProps(
            bucket_name="b",
            model_prefix="models/",
            archives=(TEXT_ARCHIVE.removesuffix(".tar.gz"),),
            triton_version="24.09",
            region="us-west-2",
        ),
    )
    return [o for o in chart.to_json() if o["kind"] == "NetworkPolicy"]


@pytest.fixture(scope="module")
def training_policies() -> list[dict]:
    return list(TrainingNetworkPolicyChart(cdk8s.App(), "n", namespace="training").to_json())


def test_policies_validate_against_kubernetes(triton_policies, training_policies) -> None:
    for policy in [*triton_policies, *training_policies]:
        kubernetes_validate.validate(policy, KUBERNETES, strict=True)
    assert {p["metadata"]["namespace"] for p in triton_policies} == {"triton"}
    assert {p["metadata"]["namespace"] for p in training_policies} == {"training"}


@pytest.mark.parametrize(
    ("source", "port", "expected"),
    [
        (ns("app", **{TRITON_CLIENT_LABEL: "true"}), 8000, True),
        (ns("app", **{TRITON_CLIENT_LABEL: "true"}), 8001, False),  # gRPC is off by default
        (ns("app", **{TRITON_CLIENT_LABEL: "true"}), 8002, False),
        (ns("app"), 8000, False),  # an unlabelled namespace
        (ns("training"), 8001, False),
        (ns("triton"), 8000, False),  # not even from its own namespace
        (ns(METRICS_SCRAPER_NAMESPACE), 8002, True),
        (ns(METRICS_SCRAPER_NAMESPACE), 8000, False),
        (ns("kube-system"), 8002, False),
    ],
)
def test_triton_ingress(triton_policies, source, port, expected) -> None:
    other = {"ns": source, "pod": {"app": "client"}}
    assert allowed(triton_policies, "ingress", TRITON_POD, other, port) is expected


@pytest.mark.parametrize(
    ("target", "port", "protocol", "expected"),
    [
        ({"ns": ns("kube-system"), "pod": DNS_POD}, 53, "UDP", True),
        ({"ns": ns("kube-system"), "pod": DNS_POD}, 53, "TCP", True),
        ({"ns": ns("kube-system"), "pod": {"k8s-app": "other"}}, 53, "UDP", False),
        ({"ip": "52.218.0.10"}, 443, "TCP", True),  # S3
        ({"ip": "52.218.0.10"}, 80, "TCP", False),
        ({"ip": "169.254.169.254"}, 80, "TCP", False),  # IMDS
        ({"ip": "169.254.169.254"}, 443, "TCP", False),
        ({"ip": "169.254.170.23"}, 80, "TCP", True),  # the Pod Identity agent
        ({"ip": "10.0.0.10"}, 443, "TCP", False),  # the private API endpoint, other nodes
        ({"ip": "172.20.0.1"}, 443, "TCP", False),  # the kubernetes Service
        ({"ip": "100.64.0.9"}, 443, "TCP", False),
        ({"ns": ns("training"), "pod": {}}, 29500, "TCP", False),
    ],
)
def test_triton_egress(triton_policies, target, port, protocol, expected) -> None:
    assert allowed(triton_policies, "egress", TRITON_POD, target, port, protocol) is expected


@pytest.fixture(scope="module")
def workload_pods(settings) -> dict[str, dict[str, str]]:
    """Pod labels of the training workloads as rendered (TorchX jobs, dataset Job, TensorBoard)."""
    from ml_platform.k8s_charts.workloads import build_workload_manifests

    pods = {}
    for docs in build_workload_manifests(settings).values():
        for obj in docs:
            spec = obj.get("spec", {})
            if obj["apiVersion"].startswith("batch.volcano.sh/"):
                pods[obj["metadata"]["name"]] = spec["tasks"][0]["template"]["metadata"]["labels"]
            elif obj["kind"] in ("Job", "Deployment"):
                pods[obj["metadata"]["name"]] = spec["template"]["metadata"]["labels"]
    assert set(pods) == {"bert-dataset", "bert-precompile", "bert-pretrain", "tensorboard"}
    return pods


def test_training_workers_talk_to_each_other_and_nobody_else_in(
    training_policies, workload_pods
) -> None:
    pod = workload_pods["bert-pretrain"]
    peer = {"ns": ns("training"), "pod": workload_pods["bert-pretrain"]}
    for port in (29500, 62182, 12345):  # c10d rendezvous, NEURON_RT_ROOT_COMM_ID, any
        assert allowed(training_policies, "ingress", pod, peer, port)
        assert allowed(training_policies, "egress", pod, peer, port)
    for source in (ns("triton"), ns("default"), ns("kube-system")):
        assert not allowed(training_policies, "ingress", pod, {"ns": source, "pod": {}}, 29500)
    # Not even TensorBoard or the dataset job reach the workers.
    for other in ("tensorboard", "bert-dataset"):
        assert not allowed(
            training_policies,
            "ingress",
            pod,
            {"ns": ns("training"), "pod": workload_pods[other]},
            29500,
        )
    assert not allowed(
        training_policies, "egress", pod, {"ns": ns("triton"), "pod": TRITON_POD}, 8000
    )


@pytest.mark.parametrize(
    ("workload", "https"),
    [
        ("bert-pretrain", True),
        ("bert-precompile", True),
        ("bert-dataset", True),
        ("tensorboard", False),
    ],
)
def test_training_egress_is_dns_and_public_https_for_those_that_download(
    training_policies, workload_pods, workload, https
) -> None:
    pod = workload_pods[workload]
    assert allowed(
        training_policies, "egress", pod, {"ns": ns("kube-system"), "pod": DNS_POD}, 53, "UDP"
    )
    assert allowed(training_policies, "egress", pod, {"ip": "52.92.0.1"}, 443) is https  # S3
    assert not allowed(training_policies, "egress", pod, {"ip": "52.92.0.1"}, 80)
    # Nothing private over HTTPS: the API server's ENIs, the service range, IMDS, other nodes.
    for ip in ("10.0.12.7", "172.20.0.1", "192.168.1.1", "100.64.3.4", "169.254.169.254"):
        assert not allowed(training_policies, "egress", pod, {"ip": ip}, 443), ip


def test_evaluator_sees_no_isolation_without_policies() -> None:
    assert allowed([], "ingress", TRITON_POD, {"ns": ns("x"), "pod": {}}, 8000)


# -- synthesized stacks ----------------------------------------------------------------------


def _resources(synth: SynthesizedPlatform, kind: str):
    for path in synth.template_paths():
        stack = path.name.removesuffix(".template.json").split("-", 1)[1]
        for logical_id, resource in synth.template_json(stack).get("Resources", {}).items():
            if resource["Type"] == kind:
                yield stack, logical_id, resource


def test_vpc_cni_enforces_network_policies(synth: SynthesizedPlatform) -> None:
    (cni,) = [
        r
        for _, _, r in _resources(synth, "AWS::EKS::Addon")
        if r["Properties"]["AddonName"] == "vpc-cni"
    ]
    # Strict mode: a new pod is default-deny until its policies are in place (EKS user guide,
    # cni-network-policy-configure: NETWORK_POLICY_ENFORCING_MODE of the aws-node container).
    assert json.loads(cni["Properties"]["ConfigurationValues"]) == {
        "enableNetworkPolicy": "true",
        "env": {"NETWORK_POLICY_ENFORCING_MODE": "strict"},
    }


def test_system_namespaces_get_allow_all_policies_before_their_pods(
    synth: SynthesizedPlatform,
) -> None:
    """Strict mode gives a pod no policy selects no traffic: kube-system, volcano-system and
    amazon-cloudwatch get allow-all policies (standard mode's behaviour for them), applied
    before CoreDNS, the FSx and CloudWatch add-ons, Volcano and the device plugins."""
    from tests.helpers.manifests import manifests_by_id

    template = synth.template_json("TrainingCluster")["Resources"]
    manifests = manifests_by_id(synth.template_json("TrainingCluster"))
    (system_id,) = [
        k
        for k, objs in manifests.items()
        if any(o["metadata"]["name"] == "allow-all" for o in objs)
    ]
    objects = manifests[system_id]
    policies = {
        o["metadata"]["namespace"]: o["spec"] for o in objects if o["kind"] == "NetworkPolicy"
    }
    assert set(policies) == {"kube-system", "volcano-system", "amazon-cloudwatch"}
    for spec in policies.values():
        assert spec == {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{}],
            "egress": [{}],
        }
        assert allowed(
            [{"metadata": {"namespace": "x"}, "spec": spec}],
            "egress",
            {},
            {"ip": "8.8.8.8"},
            53,
            "UDP",
        )
    assert {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"} == {
        "volcano-system",
        "amazon-cloudwatch",
    }
    waiting = [k for k, r in template.items() if system_id in r.get("DependsOn", [])]
    names = {template[k]["Properties"].get("AddonName") or template[k]["Type"] for k in waiting}
    assert {
        "coredns",
        "aws-fsx-csi-driver",
        "amazon-cloudwatch-observability",
        "Custom::AWSCDK-EKS-HelmChart",
    } <= names
    assert sum(template[k]["Type"] == "Custom::AWSCDK-EKS-KubernetesResource" for k in waiting) >= 2


def test_training_network_policies_are_applied_to_the_cluster(synth: SynthesizedPlatform) -> None:
    kinds = []
    for _, _, resource in _resources(synth, "Custom::AWSCDK-EKS-KubernetesResource"):
        manifest = resource["Properties"]["Manifest"]
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        if "NetworkPolicy" in text:
            kinds.append(text)
    joined = "".join(kinds)
    for name in (
        "default-deny",
        "allow-dns",
        "allow-between-workers",
        "allow-https-workers",
        "allow-https-dataset",
        "allow-https-egress",
        "allow-serving",
        "allow-pod-identity-agent",
        "allow-all",
    ):
        assert name in joined, name


def test_every_node_launch_template_has_imds_hop_limit_1(synth: SynthesizedPlatform) -> None:
    templates = list(_resources(synth, "AWS::EC2::LaunchTemplate"))
    assert len(templates) >= 3  # system, Trainium, GPU nodes
    for stack, logical_id, resource in templates:
        options = resource["Properties"]["LaunchTemplateData"]["MetadataOptions"]
        assert options == {
            "HttpEndpoint": "enabled",
            "HttpTokens": "required",
            "HttpPutResponseHopLimit": 1,
        }, (stack, logical_id)


def test_pod_identity_roles_trust_only_their_cluster_namespace_and_service_account(
    synth: SynthesizedPlatform,
) -> None:
    associations = list(_resources(synth, "AWS::EKS::PodIdentityAssociation"))
    assert {a["Properties"]["ServiceAccount"] for _, _, a in associations} == {
        "aws-node",
        "fsx-csi-controller-sa",
        "cloudwatch-agent",
        "triton",
    }
    for stack, _, association in associations:
        props = association["Properties"]
        role_id = props["RoleArn"]["Fn::GetAtt"][0]
        role = synth.template_json(stack)["Resources"][role_id]
        (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
        assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
        # The cluster's ARN, not its name: a cluster of the same name in another region of
        # the account must not match (pod-id-abac session tags).
        cluster_id = props["ClusterName"]["Ref"]
        assert statement["Condition"] == {
            "StringEquals": {
                "aws:RequestTag/eks-cluster-arn": {"Fn::GetAtt": [cluster_id, "Arn"]},
                "aws:RequestTag/kubernetes-namespace": props["Namespace"],
                "aws:RequestTag/kubernetes-service-account": props["ServiceAccount"],
            }
        }, role_id


# -- securityContext of every pod we emit ----------------------------------------------------

# (kind, name, container) -> why it keeps more than the baseline (upstream charts' needs).
PRIVILEGED = {
    (
        "DaemonSet",
        "aws-efa-k8s-device-plugin",
        "aws-efa-k8s-device-plugin",
    ): "upstream eks-charts aws-efa-k8s-device-plugin: privileged, host network (opens "
    "/dev/infiniband and registers with the kubelet)",
}


def _pods(obj: dict) -> list[dict]:
    spec = obj.get("spec", {})
    if obj["apiVersion"].startswith("batch.volcano.sh/"):  # Volcano task templates as pods
        return [t["template"]["spec"] for t in spec.get("tasks", [])]
    if obj["kind"] in ("Deployment", "DaemonSet", "Job", "StatefulSet"):
        return [spec["template"]["spec"]]
    return []


def emitted_objects(settings) -> list[dict]:
    from ml_platform.k8s_charts.nvidia import NvidiaDevicePluginChart
    from ml_platform.k8s_charts.workloads import build_workload_manifests
    from ml_platform.stacks.training_cluster import cluster_charts

    app = cdk8s.App()
    charts = cluster_charts(
        app, settings, file_system_id="fs-0", file_system_dns_name="d", file_system_mount_name="m"
    )
    objects = [o for c in charts.values() for o in c.to_json()]
    objects += TritonChart(
        app,
        "triton",
        props=TritonChartProps(
            bucket_name="b",
            model_prefix="models/",
            archives=settings.triton_on_eks.archives,
            triton_version="24.09",
            region="us-west-2",
        ),
    ).to_json()
    objects += NvidiaDevicePluginChart(app, "nvidia").to_json()
    objects += [o for docs in build_workload_manifests(settings).values() for o in docs]
    return objects


def test_every_container_drops_capabilities_and_privilege_escalation(settings) -> None:
    containers = 0
    for obj in emitted_objects(settings):
        for pod in _pods(obj):
            for container in [*pod.get("initContainers", []), *pod["containers"]]:
                containers += 1
                where = (obj["kind"], obj["metadata"]["name"], container["name"])
                context = container.get("securityContext", {})
                if where in PRIVILEGED:
                    continue
                assert context.get("allowPrivilegeEscalation") is False, where
                assert "ALL" in context.get("capabilities", {}).get("drop", []), where
                assert not context.get("privileged"), where
    assert containers >= 10


def test_flow_log_role_trusts_only_this_accounts_flow_logs(synth: SynthesizedPlatform) -> None:
    roles = [
        r
        for _, _, r in _resources(synth, "AWS::IAM::Role")
        if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        == {"Service": "vpc-flow-logs.amazonaws.com"}
    ]
    (role,) = roles
    (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Condition"] == {
        "StringEquals": {"aws:SourceAccount": "123456789012"},
        "ArnLike": {"aws:SourceArn": "arn:aws:ec2:us-west-2:123456789012:vpc-flow-log/*"},
    }


def test_access_log_bucket_is_versioned(synth: SynthesizedPlatform) -> None:
    bucket = synth.template_json("Storage")["Resources"]["ModelsAccessLogs3743BCAB"]["Properties"]
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    (rule,) = bucket["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == 365
    assert rule["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}
