"""An admission policy that keeps the platform's training jobs in the training namespace.

The training namespace holds what a training job needs and nothing else has: the ``fsx-claim``
volume, the training NetworkPolicies and Pod Security labels. A Volcano Job submitted to the
platform's queue, or mounting ``fsx-claim``, from any other namespace (``torchx run -cfg
namespace=...``, ``kubectl apply -n ...``) would wait forever for a claim that is not there.
The API server refuses it instead, naming the namespace it came in and the one it must use.

The TorchX component cannot refuse it itself: TorchX hands the scheduler's ``namespace`` to
the scheduler, never to the component (``torchx/schedulers/kubernetes_scheduler.py``), so the
check lives where every submission passes. ``mlp train`` submits only to the training
namespace and refuses another one on its command line (``--namespace``).

A ValidatingAdmissionPolicy (``admissionregistration.k8s.io/v1``, GA since Kubernetes 1.30)
works for custom resources too, and ``request.namespace`` is the namespace of the request
(https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/).
"""

from __future__ import annotations

__all__ = [
    "TrainingNamespacePolicyChart",
]

import cdk8s
from cdk8s_plus_35 import k8s
from constructs import Construct

from ml_platform.k8s_names import FSX_CLAIM

POLICY_NAME = "ml-platform-training-namespace"
VOLCANO_JOBS = ("batch.volcano.sh", "v1alpha1", "jobs")


def match_condition(queue: str) -> str:
    """CEL: the request is a Volcano Job of the platform (its queue, or the FSx claim)."""
    mounts_claim = (
        "has(object.spec.tasks) && object.spec.tasks.exists(t, has(t.template.spec.volumes) && "
        "t.template.spec.volumes.exists(v, has(v.persistentVolumeClaim) && "
        f"v.persistentVolumeClaim.claimName == '{FSX_CLAIM}'))"
    )
    return f"(has(object.spec.queue) && object.spec.queue == '{queue}') || ({mounts_claim})"


def namespace_rule(namespace: str, queue: str) -> tuple[str, str]:
    """CEL (expression, messageExpression): the request's namespace is ``namespace``."""
    return (
        f"request.namespace == '{namespace}'",
        f"'training jobs of queue {queue} (and jobs mounting {FSX_CLAIM}) run only in namespace "
        f"{namespace}, which holds {FSX_CLAIM} and the training policies; this one was "
        "submitted to namespace ' + request.namespace + ': submit it with namespace="
        f"{namespace}'",
    )


class TrainingNamespacePolicyChart(cdk8s.Chart):
    """The policy and its binding (Deny, Audit) refusing the platform's Volcano Jobs outside
    ``namespace``.

    Args:
        namespace: The training namespace. Required.
        queue: The platform's Volcano queue. Required.

    Attributes:
        policy: The ``ValidatingAdmissionPolicy``. binding: Its binding.
    """

    def __init__(self, scope: Construct, construct_id: str, *, namespace: str, queue: str) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        labels = {"app.kubernetes.io/part-of": "ml-platform"}
        group, version, resource = VOLCANO_JOBS
        expression, message = namespace_rule(namespace, queue)
        self.policy = k8s.KubeValidatingAdmissionPolicy(
            self,
            "Policy",
            metadata=k8s.ObjectMeta(name=POLICY_NAME, labels=labels),
            spec=k8s.ValidatingAdmissionPolicySpec(
                failure_policy="Fail",
                match_constraints=k8s.MatchResources(
                    resource_rules=[
                        k8s.NamedRuleWithOperations(
                            api_groups=[group],
                            api_versions=[version],
                            operations=["CREATE", "UPDATE"],
                            resources=[resource],
                        )
                    ]
                ),
                match_conditions=[
                    k8s.MatchCondition(
                        name="platform-training-job", expression=match_condition(queue)
                    )
                ],
                validations=[k8s.Validation(expression=expression, message_expression=message)],
            ),
        )
        self.binding = k8s.KubeValidatingAdmissionPolicyBinding(
            self,
            "Binding",
            metadata=k8s.ObjectMeta(name=POLICY_NAME, labels=labels),
            spec=k8s.ValidatingAdmissionPolicyBindingSpec(
                policy_name=POLICY_NAME, validation_actions=["Deny", "Audit"]
            ),
        )
