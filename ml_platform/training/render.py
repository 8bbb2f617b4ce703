"""Render a TorchX AppDef into a Volcano Job with TorchX's own Kubernetes renderer.

The manifests for review are exactly what ``torchx run -s kubernetes`` would submit,
minus what changes on every call. :func:`normalize_volcano_job` is that one documented
difference.
"""

from __future__ import annotations

__all__ = [
    "TRAINING_SECURITY_CONTEXT",
    "VOLCANO_API_VERSION",
    "harden_containers",
    "normalize_volcano_job",
    "render_volcano_job",
]

import copy
import re
import warnings
from typing import Any

from kubernetes.client import ApiClient
from torchx.schedulers.kubernetes_scheduler import create_scheduler
from torchx.specs import AppDef
from torchx.util.strings import normalize_str

VOLCANO_API_VERSION = "batch.volcano.sh/v1alpha1"
SESSION_NAME = "ml-platform"  # TorchX session name; it does not appear in the output


def torchx_volcano_job(app: AppDef, *, queue: str, namespace: str) -> dict[str, Any]:
    """The Volcano Job TorchX's Kubernetes scheduler would submit for ``app``, as plain data.

    Uses the scheduler's offline dry run (``validate_spec`` off, so no API server is
    contacted) and converts the Kubernetes client models to JSON-able dicts.
    """
    scheduler = create_scheduler(SESSION_NAME)
    with warnings.catch_warnings():
        # TorchX warns on every role with retries that old Volcano releases mishandled
        # them; Volcano 1.15 is long past that.
        warnings.filterwarnings("ignore", message=r"(?s).*does NOT support retries")
        info = scheduler.submit_dryrun(
            app, {"queue": queue, "namespace": namespace, "validate_spec": False}
        )
    job: dict[str, Any] = ApiClient().sanitize_for_serialization(info.request.resource)
    return job


def normalize_volcano_job(resource: dict[str, Any], *, namespace: str) -> dict[str, Any]:
    """Make TorchX's rendering reproducible and ready for ``kubectl apply``.

    TorchX names each submission ``<normalized app name>-<random suffix>`` and uses that
    id in the Job name, the ``app.kubernetes.io/instance`` pod label and wherever the
    ``${app_id}`` macro appears (the ``--rdzv_id`` argument). Every occurrence is replaced
    by the stable name, the normalized app name, so two builds are identical. TorchX also
    leaves the namespace to the API call; a manifest file has to carry it, so
    ``metadata.namespace`` is set. Nothing else differs between calls (checked by the tests:
    two renderings normalize to the same document). The ``torchx.pytorch.org/version``
    label is kept: it changes only with the installed TorchX.

    Returns a new dict; ``resource`` is not modified.
    """
    unique = resource["metadata"]["name"]
    match = re.fullmatch(r"(?P<stable>[a-z0-9][-a-z0-9]*)-[a-z0-9]+", unique)
    if match is None:
        raise ValueError(f"unexpected TorchX job name {unique!r}: expected '<name>-<suffix>'")
    stable = match.group("stable")
    doc: dict[str, Any] = _replace_in_strings(copy.deepcopy(resource), unique, stable)
    rest = {k: v for k, v in doc["metadata"].items() if k not in ("name", "namespace")}
    doc["metadata"] = {"name": stable, "namespace": namespace, **rest}
    return doc


def render_volcano_job(app: AppDef, *, queue: str, namespace: str) -> dict[str, Any]:
    """:func:`torchx_volcano_job` followed by :func:`normalize_volcano_job`.

    The Job is named after the app (``normalize_str(app.name)``).
    """
    doc = harden_containers(
        normalize_volcano_job(
            torchx_volcano_job(app, queue=queue, namespace=namespace), namespace=namespace
        )
    )
    expected = normalize_str(app.name)
    if doc["metadata"]["name"] != expected:  # TorchX changed its naming scheme
        raise ValueError(f"rendered Job {doc['metadata']['name']!r}, expected {expected!r}")
    return doc


TRAINING_SECURITY_CONTEXT = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
"""securityContext of every training container. No privilege escalation and no Linux
capabilities: Neuron devices and EFA interfaces come from their device plugins, torchrun
listens on unprivileged ports. Not runAsNonRoot: the Neuron training image runs as root and
the shared FSx volume (/data: dataset, checkpoints, compile cache) is root-owned. Not
readOnlyRootFilesystem: the Neuron compiler and runtime write under /tmp and ~/.cache."""


def harden_containers(doc: dict[str, Any]) -> dict[str, Any]:
    """Set :data:`TRAINING_SECURITY_CONTEXT` on every container of every task (a copy)."""
    doc = copy.deepcopy(doc)
    for task in doc.get("spec", {}).get("tasks", []):
        pod = task["template"]["spec"]
        for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
            container["securityContext"] = {
                **container.get("securityContext", {}),
                **copy.deepcopy(TRAINING_SECURITY_CONTEXT),
            }
    return doc


def _replace_in_strings(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_replace_in_strings(v, old, new) for v in value]
    if isinstance(value, dict):
        return {
            _replace_in_strings(k, old, new): _replace_in_strings(v, old, new)
            for k, v in value.items()
        }
    return value
