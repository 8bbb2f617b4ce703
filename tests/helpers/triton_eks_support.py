"""Helpers shared by the Triton-on-EKS tests."""

from __future__ import annotations

import os
import subprocess
import tempfile


def server_argv(container: dict) -> list[str]:
    """The arguments the container's shell passes to tritonserver, from running its command
    with a stand-in ``tritonserver`` that prints them."""
    assert "args" not in container and "$(" not in " ".join(container["command"])
    with tempfile.TemporaryDirectory() as folder:
        fake = os.path.join(folder, "tritonserver")
        with open(fake, "w") as handle:
            handle.write('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
        os.chmod(fake, 0o755)
        result = subprocess.run(
            container["command"],
            env={**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"},
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    return result.stdout.splitlines()
