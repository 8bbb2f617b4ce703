"""User data of the accelerator launch templates: what a node needs before containerd starts
its first pod, beside the bootstrap EKS writes itself.

EKS managed node groups on AL2023 with no image in the launch template merge the template's
user data with their own ``NodeConfig`` for nodeadm; the template's must be a MIME multi-part
document (EKS user guide, "Customize managed nodes with launch templates", user data for
AL2023: https://docs.aws.amazon.com/eks/latest/userguide/launch-templates.html).

Order on an AL2023 node (awslabs/amazon-eks-ami,
``templates/al2023/runtime/rootfs/etc/systemd/system/nodeadm-config.service`` and
``nodeadm-run.service``): ``nodeadm-config`` runs before cloud-init; the shell-script parts run
in cloud-init's final stage; ``nodeadm-run`` starts *after* ``cloud-final.service`` and starts
containerd and the kubelet. It starts containerd with a plain systemd start
(``nodeadm/internal/daemon/systemd.go``: ``StartUnit``, no reload, no restart), which does
nothing to a containerd already running. So the script writes its drop-in, reloads systemd
and restarts containerd only if it is already running (``try-restart``): either way the
containerd that nodeadm hands to the kubelet has the new limit, and no pod has started yet.
"""

from __future__ import annotations

from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText

MIME_BOUNDARY = "==ml-platform-user-data=="
"""Fixed, so the user data (and the launch template version) changes only with its content."""

CONTAINERD_DROP_IN_DIR = "/etc/systemd/system/containerd.service.d"
MEMLOCK_DROP_IN = f"{CONTAINERD_DROP_IN_DIR}/90-ml-platform-memlock.conf"
"""After AL2023's own ``00-runtime-slice.conf`` (which sets only ``Slice=runtime.slice``)."""

MEMLOCK_LIMIT = "infinity"
"""containerd's ``LimitMEMLOCK``: containers inherit the limit from containerd through its
shims (AL2023's base runtime spec sets only ``RLIMIT_NOFILE``:
``nodeadm/internal/containerd/base-runtime-spec.json``), and EFA pins memory for its queues
(EKS user guide, "Run machine learning training on Amazon EKS with Elastic Fabric Adapter",
https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html; EFA's own installer raises
memlock for the same reason)."""

MEMLOCK_SCRIPT = f"""#!/bin/bash
# ml-platform: unlimited locked memory for containerd and so for every container (EFA).
set -euo pipefail
mkdir -p {CONTAINERD_DROP_IN_DIR}
printf '[Service]\\nLimitMEMLOCK={MEMLOCK_LIMIT}\\n' > {MEMLOCK_DROP_IN}
systemctl daemon-reload
systemctl try-restart containerd.service
"""
"""The shell-script part: runs in cloud-final, before ``nodeadm-run`` starts containerd."""


def mime_user_data(*scripts: str) -> str:
    """A MIME multi-part document with one ``text/x-shellscript`` part per script, as EKS
    merges it with its nodeadm ``NodeConfig`` part."""
    document = MIMEMultipart(boundary=MIME_BOUNDARY)
    for script in scripts:
        document.attach(MIMEText(script, "x-shellscript", "us-ascii"))
    return document.as_string()


def efa_node_user_data() -> str:
    """The user data of EFA nodes: :data:`MEMLOCK_SCRIPT`."""
    return mime_user_data(MEMLOCK_SCRIPT)
