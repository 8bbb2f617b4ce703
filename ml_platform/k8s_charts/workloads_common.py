"""Pieces shared by the workload charts: labels and placement of helper pods."""

from __future__ import annotations

from cdk8s_plus_35 import k8s

from ml_platform.k8s_charts.names import NODE_ROLE_LABEL

PART_OF = "ml-platform"
ZONE_LABEL = "topology.kubernetes.io/zone"


def labels(name: str, component: str) -> dict[str, str]:
    """Recommended ``app.kubernetes.io`` labels of one workload."""
    return {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "cdk8s",
    }


def system_node_selector() -> dict[str, str]:
    """Helper pods (dataset copy, TensorBoard) run on the system node group."""
    return {NODE_ROLE_LABEL: "system"}


def near_fsx_affinity(trainium_az: str) -> k8s.Affinity:
    """Prefer nodes in the Trainium AZ, where FSx for Lustre lives (no cross-AZ traffic)."""
    return k8s.Affinity(
        node_affinity=k8s.NodeAffinity(
            preferred_during_scheduling_ignored_during_execution=[
                k8s.PreferredSchedulingTerm(
                    weight=100,
                    preference=k8s.NodeSelectorTerm(
                        match_expressions=[
                            k8s.NodeSelectorRequirement(
                                key=ZONE_LABEL,
                                operator="In",
                                values=[trainium_az],
                            )
                        ]
                    ),
                )
            ]
        )
    )


def restricted_container_security(*, run_as_root: bool = False) -> k8s.SecurityContext:
    """Container security context: no privilege escalation, no capabilities, read-only root."""
    return k8s.SecurityContext(
        allow_privilege_escalation=False,
        capabilities=k8s.Capabilities(drop=["ALL"]),
        read_only_root_filesystem=True,
        run_as_non_root=not run_as_root,
    )


def resources(cpu: str, memory: str, memory_limit: str) -> k8s.ResourceRequirements:
    """Requests of ``cpu`` and ``memory``; memory limited to ``memory_limit``, CPU unlimited."""
    return k8s.ResourceRequirements(
        requests={"cpu": k8s.Quantity.from_string(cpu), "memory": k8s.Quantity.from_string(memory)},
        limits={"memory": k8s.Quantity.from_string(memory_limit)},
    )
