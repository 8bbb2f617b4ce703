"""A Pod Security Standards checker: the baseline and restricted controls, written from the
policy table of https://kubernetes.io/docs/concepts/security/pod-security-standards/ (as of
Kubernetes v1.34, the version the platform's namespace labels pin), over pod specs as plain
dicts (camelCase, as the manifests hold them).

No PSS checker is packaged for Python; this one names each control as that page does, and
tests/app/test_pod_security.py proves each rule fires on a pod that breaks it.
"""

from __future__ import annotations

from typing import Any

LEVELS = ("privileged", "baseline", "restricted")

# Baseline: "Capabilities": adding beyond this list is forbidden.
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
# Baseline: "Sysctls": the safe subset (with the versions that added the later ones, all <= 1.29).
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
# Restricted: "Volume Types".
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
_VOLUME_META = {"name"}


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        *pod.get("initContainers", []),
        *pod.get("containers", []),
        *pod.get("ephemeralContainers", []),
    ]


def baseline_violations(
    pod: dict[str, Any], annotations: dict[str, str] | None = None
) -> list[str]:
    """The baseline controls ``pod`` (a PodSpec) breaks, one line each."""
    out: list[str] = []
    pod_context = pod.get("securityContext") or {}
    containers = _containers(pod)
    contexts = [(c["name"], c.get("securityContext") or {}) for c in containers]
    # HostProcess
    for where, context in [("pod", pod_context), *contexts]:
        if (context.get("windowsOptions") or {}).get("hostProcess"):
            out.append(f"HostProcess: {where}")
    # Host Namespaces
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            out.append(f"Host Namespaces: {field}")
    # Privileged Containers
    for name, context in contexts:
        if context.get("privileged"):
            out.append(f"Privileged Containers: {name}")
    # Capabilities
    for name, context in contexts:
        added = set((context.get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        if added:
            out.append(f"Capabilities: {name} adds {sorted(added)}")
    # HostPath Volumes
    for volume in pod.get("volumes", []):
        if "hostPath" in volume:
            out.append(f"HostPath Volumes: {volume['name']}")
    # Host Ports
    for container in containers:
        for port in container.get("ports", []):
            if port.get("hostPort"):
                out.append(f"Host Ports: {container['name']} {port['hostPort']}")
    # AppArmor (field and the older annotations)
    for where, context in [("pod", pod_context), *contexts]:
        kind = (context.get("appArmorProfile") or {}).get("type")
        if kind not in (None, "RuntimeDefault", "Localhost"):
            out.append(f"AppArmor: {where} {kind}")
    for key, value in (annotations or {}).items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
            value == "runtime/default" or value.startswith("localhost/")
        ):
            out.append(f"AppArmor: annotation {key}={value}")
    # SELinux
    for where, context in [("pod", pod_context), *contexts]:
        options = context.get("seLinuxOptions") or {}
        if (
            options.get("type", "") not in SELINUX_TYPES
            or options.get("user")
            or options.get("role")
        ):
            out.append(f"SELinux: {where} {options}")
    # /proc Mount Type
    for name, context in contexts:
        if context.get("procMount") not in (None, "Default"):
            out.append(f"/proc Mount Type: {name}")
    # Seccomp
    for where, context in [("pod", pod_context), *contexts]:
        if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
            out.append(f"Seccomp: {where} Unconfined")
    # Sysctls
    for sysctl in pod_context.get("sysctls", []):
        if sysctl["name"] not in SAFE_SYSCTLS:
            out.append(f"Sysctls: {sysctl['name']}")
    return out


def restricted_violations(
    pod: dict[str, Any], annotations: dict[str, str] | None = None
) -> list[str]:
    """The baseline and restricted controls ``pod`` breaks, one line each."""
    out = baseline_violations(pod, annotations)
    pod_context = pod.get("securityContext") or {}
    contexts = [(c["name"], c.get("securityContext") or {}) for c in _containers(pod)]
    # Volume Types
    for volume in pod.get("volumes", []):
        kinds = set(volume) - _VOLUME_META
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(f"Volume Types: {volume['name']} {sorted(kinds)}")
    for name, context in contexts:
        # Privilege Escalation
        if context.get("allowPrivilegeEscalation") is not False:
            out.append(f"Privilege Escalation: {name}")
        # Running as Non-root: the container's value, else the pod's, must be true.
        non_root = context.get("runAsNonRoot", pod_context.get("runAsNonRoot"))
        if non_root is not True:
            out.append(f"Running as Non-root: {name}")
        # Running as Non-root user
        if context.get("runAsUser", pod_context.get("runAsUser")) == 0:
            out.append(f"Running as Non-root user: {name}")
        # Seccomp: RuntimeDefault or Localhost, on the container or inherited from the pod.
        profile = context.get("seccompProfile") or pod_context.get("seccompProfile") or {}
        if profile.get("type") not in ("RuntimeDefault", "Localhost"):
            out.append(f"Seccomp: {name} {profile.get('type')}")
        # Capabilities: drop ALL, add at most NET_BIND_SERVICE.
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            out.append(f"Capabilities: {name} does not drop ALL")
        if set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"Capabilities: {name} adds {sorted(capabilities['add'])}")
    return out


def violations(
    level: str, pod: dict[str, Any], annotations: dict[str, str] | None = None
) -> list[str]:
    """What ``pod`` breaks at ``level`` (nothing at ``privileged``)."""
    if level == "privileged":
        return []
    if level == "baseline":
        return baseline_violations(pod, annotations)
    if level == "restricted":
        return restricted_violations(pod, annotations)
    raise ValueError(f"level={level!r}: expected one of {LEVELS}")
