"""Pieces shared by the workload charts: labels and placement of helper pods."""

from __future__ import annotations

from cdk8s_plus_35 import k8s

from ml_platform.k8s_names import NODE_ROLE_LABEL

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
    """Helper pods (dataset copy, TensorBoard) run on system-role nodes (the system and
    training-helper node groups); :func:`only_in_fsx_zone` narrows them to FSx's AZ."""
    return {NODE_ROLE_LABEL: "system"}


def only_in_fsx_zone(trainium_az: str) -> k8s.Affinity:
    """Require nodes in the Trainium AZ, where FSx for Lustre lives: a helper pod elsewhere
    would read and write the file system across AZs (cross-AZ traffic, more latency). The
    training-helper node group (``cluster.helper_nodes``) keeps a system node there, so the
    pods never wait for one (docs/training.md, "Where the pods run")."""
    return k8s.Affinity(
        node_affinity=k8s.NodeAffinity(
            required_during_scheduling_ignored_during_execution=k8s.NodeSelector(
                node_selector_terms=[
                    k8s.NodeSelectorTerm(
                        match_expressions=[
                            k8s.NodeSelectorRequirement(
                                key=ZONE_LABEL, operator="In", values=[trainium_az]
                            )
                        ]
                    )
                ]
            )
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
