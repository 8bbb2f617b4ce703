"""The local server's work folder must leave its Unix socket path within Linux's limit."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ml_platform_cli.local_server import (
    MAX_SOCKET_PATH_BYTES,
    LocalServerError,
    LocalTriton,
    ServerEnv,
)

ENV = ServerEnv(
    python=Path("/nonexistent/bin/python"),
    python_version="3.11",
    base_prefix=Path("/nonexistent"),
    libdir=Path("/nonexistent/lib"),
    site_packages=Path("/nonexistent/site-packages"),
    pytriton=Path("/nonexistent/site-packages/pytriton"),
    runtimes={},
)


def test_the_limit_is_the_kernels(tmp_path: Path) -> None:
    """Observed: a path of MAX_SOCKET_PATH_BYTES binds, one byte more does not."""
    base = str(tmp_path) + "/"
    for size, binds in ((MAX_SOCKET_PATH_BYTES, True), (MAX_SOCKET_PATH_BYTES + 1, False)):
        path = base + "s" * (size - len(base))
        with socket.socket(socket.AF_UNIX) as sock:
            if binds:
                sock.bind(path)
            else:
                with pytest.raises(OSError, match="too long"):
                    sock.bind(path)


def test_a_work_folder_too_deep_is_refused_before_anything_starts(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 100)
    server = LocalTriton(ENV, deep)
    with pytest.raises(
        LocalServerError, match=r"too deep for the server's socket .*shorter TMPDIR"
    ):
        server.start()
    assert not deep.exists()  # refused before creating anything
