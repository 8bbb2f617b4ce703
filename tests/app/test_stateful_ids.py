"""Nothing stateful changes identity silently.

CloudFormation replaces a resource whose logical ID changes: for a file system, bucket,
registry, key, log group or cluster that means new (empty) data, a new key that cannot
decrypt the old, or a new cluster; for the named endpoint, a create that fails on its name.
The types are tests/upgrade/checks.py's STATEFUL_TYPES, the list the upgrade check uses too.
Snapshots would let such a change through after ``--snapshot-update``; this list does not.
Change it only together with a migration.
"""

from __future__ import annotations

from tests.support import SynthesizedPlatform
from tests.upgrade.checks import STATEFUL_TYPES

# (stack, logical ID) -> (type, DeletionPolicy) with cdk.json's settings. RetainExceptOnCreate
# (RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE): kept on deletion and replacement, removed when
# the first create rolls back, so a retry does not fail on a fixed name that already exists.
STATEFUL = {
    ("Network", "VpcFlowLogs3A4A3791"): ("AWS::Logs::LogGroup", "RetainExceptOnCreate"),
    ("Network", "VpcFlowLogsKey4140EC14"): ("AWS::KMS::Key", "RetainExceptOnCreate"),
    ("Storage", "LustreDCDAF745"): ("AWS::FSx::FileSystem", "RetainExceptOnCreate"),
    ("Storage", "Models7F217E31"): ("AWS::S3::Bucket", "RetainExceptOnCreate"),
    ("Storage", "ModelsAccessLogs3743BCAB"): ("AWS::S3::Bucket", "RetainExceptOnCreate"),
    ("Storage", "TrainingImages84E3863B"): ("AWS::ECR::Repository", "RetainExceptOnCreate"),
    ("TrainingCluster", "Cluster9EE0221C"): ("AWS::EKS::Cluster", None),
    ("TrainingCluster", "ClusterSecretsKey462B29B5"): ("AWS::KMS::Key", "RetainExceptOnCreate"),
    # Named (triton-ensembles): a new logical ID would create a second endpoint of that name,
    # which SageMaker refuses. (Its endpoint config holds no data and is replaced on every
    # change by design: tests/upgrade/checks.py says why it is not listed.)
    ("Inference", "TritonEnsemblesF007AAAE"): ("AWS::SageMaker::Endpoint", None),
    # The endpoint's container log group (the stack owns it) and the stack's key for them:
    # storage.removal_policy's RetainExceptOnCreate (Retain before: no replacement, the
    # DeletionPolicy is no property).
    ("Inference", "TritonEnsemblesLogs86D6F3FA"): ("AWS::Logs::LogGroup", "RetainExceptOnCreate"),
    ("Inference", "EndpointLogsKey09B19345"): ("AWS::KMS::Key", "RetainExceptOnCreate"),
    # The key of the stack's alarm topic (new; the topic holds no data and is deleted).
    ("Inference", "AlarmTopicKeyBA1A4AA7"): ("AWS::KMS::Key", "RetainExceptOnCreate"),
    # The endpoint-scaling handler's log (aws-cdk's LogGroup default: retained).
    ("Inference", "EndpointScalingProviderLogs86020CE4"): ("AWS::Logs::LogGroup", "Retain"),
}


def stateful_resources(synth: SynthesizedPlatform) -> dict[tuple[str, str], tuple[str, str | None]]:
    found = {}
    for path in synth.template_paths():
        stack = path.name.removesuffix(".template.json").split("-", 1)[1]
        for logical_id, resource in synth.template_json(stack).get("Resources", {}).items():
            if resource["Type"] in STATEFUL_TYPES:
                found[(stack, logical_id)] = (resource["Type"], resource.get("DeletionPolicy"))
    return found


def test_every_stateful_resource_keeps_its_logical_id(synth: SynthesizedPlatform) -> None:
    found = stateful_resources(synth)
    renamed_or_removed = sorted(set(STATEFUL) - set(found))
    added = sorted(set(found) - set(STATEFUL))
    assert not renamed_or_removed and not added, (
        f"stateful resources changed identity: gone {renamed_or_removed}, new {added}; "
        "a new logical ID means CloudFormation replaces the resource (and its data)"
    )
    assert found == STATEFUL
