"""A local moto server as a subprocess, for the CLI tests' fixture and ``make bench-models``.

It runs :mod:`tests.helpers.moto_server_patched` (``moto.server`` with one moto bug fixed) from
the repository root, on a free port of 127.0.0.1, with no ``AWS_*`` variable of the caller.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def moto_server(
    log: Path, *, url_host: str = HOST, timeout: float = 20
) -> Iterator[tuple[str, int]]:
    """Start the server, wait until it answers, yield ``(url, port)``, stop it.

    ``url_host``: the host name of the URL (``localhost`` lets S3 virtual-host names resolve).
    """
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.helpers.moto_server_patched",
                "-H",
                HOST,
                "-p",
                str(port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
        )
        url = f"http://{url_host}:{port}"
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    urllib.request.urlopen(f"{url}/moto-api/", timeout=1).close()
                    break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"moto server did not start (see {log})") from None
                    time.sleep(0.1)
            yield url, port
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
