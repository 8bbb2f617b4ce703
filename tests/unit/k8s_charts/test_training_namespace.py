"""The platform's Volcano Jobs are refused outside the training namespace: the policy's CEL
evaluated here (cel-python) against the requests the API server would give it, for a job as
TorchX renders it (the shipped pretraining manifest), and the objects validated against every
supported Kubernetes version's schema."""

from __future__ import annotations

import copy
from typing import Any

import cdk8s
import kubernetes_validate
import pytest

from ml_platform.k8s_charts.training_namespace import (
    POLICY_NAME,
    TrainingNamespacePolicyChart,
    match_condition,
    namespace_rule,
)
from ml_platform.k8s_charts.workloads import PRETRAIN_FILE, build_workload_manifests
from ml_platform.versions import KUBERNETES_VERSIONS

celpy = pytest.importorskip("celpy", reason="cel-python (requirements-dev.txt) evaluates CEL")


@pytest.fixture(scope="module")
def job(settings) -> dict[str, Any]:
    (rendered,) = build_workload_manifests(settings)[PRETRAIN_FILE]
    return rendered


def _evaluate(expression: str, job: dict[str, Any], namespace: str) -> Any:
    env = celpy.Environment()
    activation = {
        "object": celpy.json_to_cel(job),
        "request": celpy.json_to_cel({"namespace": namespace, "operation": "CREATE"}),
    }
    return env.program(env.compile(expression)).evaluate(activation)


def test_a_platform_job_in_another_namespace_is_refused_naming_it(job, settings) -> None:
    ns, queue = settings.training.namespace, settings.training.queue
    expression, message = namespace_rule(ns, queue)
    assert _evaluate(match_condition(queue), job, "research") == True  # noqa: E712 (a CEL BoolType)
    assert _evaluate(expression, job, "research") == False  # noqa: E712 (a CEL BoolType)
    text = str(_evaluate(message, job, "research"))
    assert text == (
        f"training jobs of queue {queue} (and jobs mounting fsx-claim) run only in namespace "
        f"{ns}, which holds fsx-claim and the training policies; this one was submitted to "
        f"namespace research: submit it with namespace={ns}"
    )
    # In the training namespace: allowed.
    assert _evaluate(expression, job, ns) == True  # noqa: E712 (a CEL BoolType)


def test_the_policy_matches_by_queue_or_by_the_claim_and_leaves_other_jobs_alone(
    job, settings
) -> None:
    queue = settings.training.queue
    other_queue = copy.deepcopy(job)
    other_queue["spec"]["queue"] = "someone-elses"
    assert _evaluate(match_condition(queue), other_queue, "research") == True  # noqa: E712 (fsx-claim)
    unrelated = copy.deepcopy(other_queue)
    for task in unrelated["spec"]["tasks"]:
        task["template"]["spec"]["volumes"] = [
            v for v in task["template"]["spec"]["volumes"] if "persistentVolumeClaim" not in v
        ]
    assert _evaluate(match_condition(queue), unrelated, "research") == False  # noqa: E712 (a CEL BoolType)
    del unrelated["spec"]["queue"]
    assert _evaluate(match_condition(queue), unrelated, "research") == False  # noqa: E712 (a CEL BoolType)


def test_policy_objects_validate_for_every_supported_version() -> None:
    chart = TrainingNamespacePolicyChart(cdk8s.App(), "p", namespace="training", queue="training")
    policy, binding = chart.to_json()
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [
        {
            "apiGroups": ["batch.volcano.sh"],
            "apiVersions": ["v1alpha1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["jobs"],
        }
    ]
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert binding["spec"] == {"policyName": POLICY_NAME, "validationActions": ["Deny", "Audit"]}
    for version in KUBERNETES_VERSIONS:
        for obj in (policy, binding):
            kubernetes_validate.validate(obj, f"{version}.0", strict=True)
