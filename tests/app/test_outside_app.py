"""Point 1 of issue #12: the constructs compose in an app that is not this repository's.

One synthesis of tests/helpers/outside_app.py (session fixture) with cdk-nag attached."""

from __future__ import annotations

import json
import shlex

import aws_cdk as cdk

from tests.app.conftest import Outside
from tests.helpers.documented_metrics import dashboard_bodies, problems, render
from tests.helpers.manifests import manifests_by_id
from tests.helpers.triton_eks_support import server_argv

# Construct paths that belong to the platform's constructs (the rest is the user's own).
OURS = (
    "Shared/Efa/",
    "Shared/TrnA/",
    "Shared/TrnB/",
    "Shared/ScratchA/",
    "Shared/ScratchB/",
    "Shared/ModelsA/",
    "Shared/ModelsB/",
    "Shared/ImagesA/",
    "Shared/ImagesB/",
    "Shared/EndpointA/",
    "Shared/EndpointB/",
    "Shared/TritonA/",
    "Shared/TritonB/",
    "Shared/Custom::",
    "Clusters/",
    "Serving/",
    "Shared/EndpointADashboard/",
    "Shared/EndpointBDashboard/",
    "Shared/ClusterDashboard/",
    "Shared/ClusterDashboard2/",
)


def _manifests(outside: Outside, stack: str) -> dict[str, list[dict]]:
    return manifests_by_id(outside.template(stack))


def _objects(manifests: dict[str, list[dict]]) -> list[tuple[str, str, str | None]]:
    return [
        (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))
        for docs in manifests.values()
        for o in docs
    ]


def test_every_stack_synthesizes_without_a_cycle(outside: Outside) -> None:
    names = {p.name for p in outside.outdir.glob("*.template.json")}
    assert names == {"Shared.template.json", "Clusters.template.json", "Serving.template.json"}
    # Triton in its own stack depends on the cluster's stack, never the other way round.
    serving, shared = outside.parts["serving"], outside.parts["shared"]
    assert shared in serving.dependencies and serving not in shared.dependencies


def test_no_cdk_nag_finding_on_the_platform_constructs(outside: Outside) -> None:
    ours = [(rule, path) for rule, path in outside.nag_violations() if path.startswith(OURS)]
    assert ours == []
    # The harness sees findings: the user's own VPC has no flow log.
    assert ("AwsSolutions-VPC7", "Shared/Vpc/Resource") in outside.nag_violations()


def test_two_triton_on_eks_share_a_cluster_and_one_device_plugin(outside: Outside) -> None:
    objects = _objects(_manifests(outside, "Shared"))
    assert objects.count(("DaemonSet", "nvidia-device-plugin", "kube-system")) == 1
    for namespace in ("triton-a", "triton-b"):
        assert ("Namespace", namespace, None) in objects
        assert ("Deployment", "triton", namespace) in objects
    a, b = outside.parts["tritons"]
    assert a.device_plugin is b.device_plugin
    shared = outside.parts["shared"]
    manifests = outside.template("Shared")["Resources"]
    plugin_id = shared.get_logical_id(a.device_plugin.node.default_child)
    for triton in (a, b):
        logical = shared.get_logical_id(triton.manifest.node.default_child)
        assert plugin_id in manifests[logical]["DependsOn"]
    # Both node groups' pods get credentials: associations wait for the agent add-on.
    agents = outside.resources("Shared", "AWS::EKS::Addon")
    (agent_id,) = [
        k for k, r in agents.items() if r["Properties"]["AddonName"] == "eks-pod-identity-agent"
    ]
    associations = outside.resources("Shared", "AWS::EKS::PodIdentityAssociation")
    namespaces = {r["Properties"]["Namespace"]: r for r in associations.values()}
    assert set(namespaces) == {"triton-a", "triton-b"}
    assert all(agent_id in r["DependsOn"] for r in namespaces.values())


def test_triton_in_its_own_stack_serves_the_named_archive_with_given_props(
    outside: Outside,
) -> None:
    manifests = _manifests(outside, "Serving")
    objects = _objects(manifests)
    assert ("DaemonSet", "nvidia-device-plugin", "kube-system") not in objects
    (deployment,) = [o for docs in manifests.values() for o in docs if o["kind"] == "Deployment"]
    assert deployment["metadata"]["namespace"] == "search"
    pod = deployment["spec"]["template"]["spec"]
    fetch = shlex.split(pod["initContainers"][0]["command"][2])
    assert [w for w in fetch if w.startswith("key=")] == [
        "key=models/team-reranker-v0a1b2c3d.tar.gz"
    ]
    args = server_argv(pod["containers"][0])
    # Triton loads every unpacked model and refuses model control (issue #13)
    assert "--model-control-mode=none" in args
    assert not [a for a in args if a.startswith("--load-model")]
    (group,) = outside.resources("Serving", "AWS::EKS::Nodegroup").values()
    props = group["Properties"]
    assert props["Labels"] == {"team": "search", "ml-platform/node-role": "gpu"}
    shared = outside.parts["shared"]
    (subnet,) = props["Subnets"]
    assert "Fn::ImportValue" in subnet  # the one subnet handed in, from the user's stack
    assert outside.parts["serving_triton"].device_plugin is None
    serving = outside.parts["serving"]
    (association,) = outside.resources("Serving", "AWS::EKS::PodIdentityAssociation").values()
    assert association["Properties"]["Namespace"] == "search"
    assert shared in serving.dependencies


def test_training_clusters_get_distinct_names_from_cloudformation(outside: Outside) -> None:
    clusters = outside.resources("Clusters", "AWS::EKS::Cluster")
    assert len(clusters) == 2
    assert all("Name" not in r["Properties"] for r in clusters.values())


def test_construct_warnings_name_props_not_cdk_json_keys(outside: Outside) -> None:
    research, staging = outside.parts["clusters"]

    def warnings(c):
        return [str(m.data) for m in c.node.metadata if m.type == "aws:cdk:warning"]

    assert warnings(research) == []
    (message,) = warnings(staging)
    assert "Clusters/Staging" in message
    assert "set public_access_cidrs to your networks, or endpoint_access to 'private'" in message
    assert "cluster." not in message


def test_lustre_uses_the_given_kms_key(outside: Outside) -> None:
    systems = outside.resources("Shared", "AWS::FSx::FileSystem")
    keys = {json.dumps(r["Properties"].get("KmsKeyId")) for r in systems.values()}
    shared = outside.parts["shared"]
    key_id = shared.get_logical_id(shared.node.find_child("ScratchKey").node.default_child)
    assert keys == {json.dumps({"Ref": key_id}), "null"}


def test_lustre_accepts_a_node_group_as_client(outside: Outside) -> None:
    """ScratchB names a TrainiumNodeGroup (IConnectable) as its client."""
    shared = outside.parts["shared"]
    lustre_b = outside.parts["lustre"][1]
    group_id = shared.get_logical_id(lustre_b.security_group.node.default_child)
    efa_id = shared.get_logical_id(
        shared.node.find_child("Efa").node.find_child("Resource").node.default_child
    )
    ingress = [
        r["Properties"]
        for r in outside.resources("Shared", "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}
    ]
    from_nodes = {
        (r["FromPort"], r["ToPort"])
        for r in ingress
        if r.get("SourceSecurityGroupId") == {"Fn::GetAtt": [efa_id, "GroupId"]}
    }
    assert from_nodes == {(988, 988), (1018, 1023)}


def test_destroy_empties_buckets_and_registry_retain_does_not(outside: Outside) -> None:
    shared = outside.parts["shared"]
    resources = outside.template("Shared")["Resources"]
    kept, gone = outside.parts["model_buckets"]
    deleters = outside.resources("Shared", "Custom::S3AutoDeleteObjects")
    emptied = {json.dumps(r["Properties"]["BucketName"]) for r in deleters.values()}
    for bucket in (gone.bucket, gone.access_logs):
        ref = {"Ref": shared.get_logical_id(bucket.node.default_child)}
        assert json.dumps(ref) in emptied
        assert resources[ref["Ref"]]["DeletionPolicy"] == "Delete"
    assert len(emptied) == 2
    for bucket in (kept.bucket, kept.access_logs):
        logical = shared.get_logical_id(bucket.node.default_child)
        assert resources[logical]["DeletionPolicy"] == "RetainExceptOnCreate"
        assert resources[logical]["UpdateReplacePolicy"] == "Retain"
    kept_repo, gone_repo = outside.parts["registries"]
    gone_props = resources[shared.get_logical_id(gone_repo.repository.node.default_child)]
    kept_props = resources[shared.get_logical_id(kept_repo.repository.node.default_child)]
    assert gone_props["Properties"]["EmptyOnDelete"] is True
    assert gone_props["DeletionPolicy"] == "Delete"
    assert kept_props["Properties"].get("EmptyOnDelete") is False
    # Kept on deletion, but removed when the first create rolls back: a retry does not fail
    # on the fixed name ("already exists").
    assert kept_props["DeletionPolicy"] == "RetainExceptOnCreate"
    # The file systems' security groups and rules follow their removal policy (a retained
    # file system keeps its interfaces, so its group could not be deleted: aws/aws-cdk#31521).
    for lustre, policy in zip(
        outside.parts["lustre"], ("RetainExceptOnCreate", "Delete"), strict=False
    ):
        for group in (lustre.security_group, lustre.client_security_group):
            ids = [
                shared.get_logical_id(c)
                for c in group.node.find_all()
                if isinstance(c, cdk.CfnResource)
            ]
            assert len(ids) >= 5
            assert {resources[i].get("DeletionPolicy", "Delete") for i in ids} == {policy}


def test_access_logs_go_through_a_bucket_policy_without_our_feature_flags(
    outside: Outside,
) -> None:
    """The outside app has no cdk.json flags: log delivery must still not use an ACL."""
    flag = "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"
    assert outside.app.node.try_get_context(flag) is None
    shared = outside.parts["shared"]
    resources = outside.template("Shared")["Resources"]
    for models in outside.parts["model_buckets"]:
        logs_id = shared.get_logical_id(models.access_logs.node.default_child)
        props = resources[logs_id]["Properties"]
        assert "AccessControl" not in props
        assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
        policies = [
            r["Properties"]["PolicyDocument"]["Statement"]
            for r in outside.resources("Shared", "AWS::S3::BucketPolicy").values()
            if r["Properties"]["Bucket"] == {"Ref": logs_id}
        ]
        (statements,) = policies
        assert any(
            s.get("Principal") == {"Service": "logging.s3.amazonaws.com"}
            and s["Action"] == "s3:PutObject"
            for s in statements
        )


def test_grant_read_models_lists_only_under_the_prefix(outside: Outside) -> None:
    shared = outside.parts["shared"]
    reader = outside.parts["reader"]
    bucket = outside.parts["model_buckets"][1].bucket
    bucket_id = shared.get_logical_id(bucket.node.default_child)
    role_id = shared.get_logical_id(reader.node.default_child)
    (policy,) = [
        r["Properties"]["PolicyDocument"]["Statement"]
        for r in outside.resources("Shared", "AWS::IAM::Policy").values()
        if r["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    on_bucket = [s for s in policy if json.dumps(bucket_id) in json.dumps(s["Resource"])]
    assert on_bucket == [
        {
            "Action": "s3:GetObject",
            "Effect": "Allow",
            "Resource": {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/triton/*"]]},
        },
        {
            "Action": "s3:ListBucket",
            "Condition": {"StringLike": {"s3:prefix": ["triton/*"]}},
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [bucket_id, "Arn"]},
        },
    ]


def test_two_node_groups_share_the_efa_group_rules(outside: Outside) -> None:
    ingress = outside.resources("Shared", "AWS::EC2::SecurityGroupIngress")
    keys = [
        json.dumps(
            [
                r["Properties"].get(k)
                for k in ("GroupId", "IpProtocol", "FromPort", "ToPort", "SourceSecurityGroupId")
            ]
        )
        for r in ingress.values()
    ]
    assert len(keys) == len(set(keys))


def test_dashboards_compose_twice_with_documented_metrics(outside: Outside) -> None:
    template = outside.template("Shared")
    bodies = dashboard_bodies(template)
    assert len(bodies) == 4
    assert all("DashboardName" not in template["Resources"][k]["Properties"] for k in bodies)
    assert problems(template) == []
    # Each endpoint dashboard reads its own endpoint; the cluster dashboard without a file
    # system draws no FSx widget.
    texts = {k: json.dumps(b) for k, b in bodies.items()}
    assert sum('"EndpointName", "endpointa"' in t for t in texts.values()) == 1
    assert sum('"EndpointName", "endpointb"' in t for t in texts.values()) == 1
    assert sum("AWS/FSx" in t for t in texts.values()) == 1
    shared = outside.parts["shared"]
    first = shared.get_logical_id(outside.parts["dashboards"][0].dashboard.node.default_child)
    assert render(template["Outputs"]["EndpointADashboardUrl"]["Value"], "us-east-1") == (
        "https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1"
        f"#dashboards/dashboard/<Ref:{first}>"
    )
