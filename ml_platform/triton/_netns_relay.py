"""Runs inside a private network namespace: starts ``tritonserver`` there and relays a Unix
socket to its SageMaker port on the namespace's loopback.

Started by :mod:`ml_platform.triton.local_server` as ``unshare --net <python> _netns_relay.py
...`` (``unshare --user --map-root-user --net`` when not root), so the namespace lives exactly
as long as this process. Triton's SageMaker front end binds every interface and has no address
flag; in this namespace the only interface is ``lo``, so nothing but this machine's processes
that can open the owner-only Unix socket reaches the server.

Standard library only: it runs under the server environment's Python, which need not have
``ml_platform`` installed. Protocol on stdout: one JSON line when the server's port accepts
connections (``{"ready": true, "port": ..., "interfaces": [...], "server_pid": ...}``) or one
with ``"error"``. It stops the server by its PID on SIGTERM/SIGINT, or when stdin closes.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def die_with_parent(signal_number: int = signal.SIGKILL) -> None:
    """prctl(PR_SET_PDEATHSIG): the calling process gets ``signal_number`` when its parent
    dies, so no server outlives a killed relay (kept across exec; Linux only)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal_number), 0, 0, 0)  # 1: PR_SET_PDEATHSIG


def loopback_up() -> None:
    """``ip link set lo up`` without iproute2 (a new network namespace starts with lo down)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            target.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _relay(client: socket.socket, port: int) -> None:
    try:
        upstream = socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError:
        client.close()
        return
    upstream.settimeout(None)
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _wait_for_port(port: int, server: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", required=True, help="Unix socket to create (mode 0600)")
    parser.add_argument("--log", required=True, help="file for the server's stdout and stderr")
    parser.add_argument("--env-json", required=True, help="environment of the server, as JSON")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        help="-- tritonserver ... (the string {port} is replaced)",
    )
    args = parser.parse_args(argv)
    command = [c for c in args.command if c != "--"] if args.command[:1] == ["--"] else args.command

    def say(message: dict[str, object]) -> None:
        print(json.dumps(message), flush=True)

    try:
        loopback_up()
    except OSError as error:
        say({"error": f"cannot bring the namespace's loopback up: {error}"})
        return 1
    interfaces = sorted(name for _, name in socket.if_nameindex())
    if interfaces != ["lo"]:  # not a private namespace: refuse rather than expose the server
        say({"error": f"the network namespace has interfaces {interfaces}, expected only lo"})
        return 1
    port = free_port()
    command = [part.replace("{port}", str(port)) for part in command]
    with open(args.env_json, encoding="utf-8") as handle:
        env = json.load(handle)
    log = open(args.log, "ab")
    server = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        stdin=subprocess.DEVNULL,
        preexec_fn=die_with_parent,
    )
    stopping = threading.Event()

    def stop(*_: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if not _wait_for_port(port, server, args.timeout):
        server.kill()
        server.wait()
        say(
            {
                "error": f"tritonserver did not open port {port} (exit code {server.returncode}); "
                f"see {args.log}"
            }
        )
        return 1
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)  # the socket is created 0600: its owner only
    try:
        listener.bind(args.socket)
    finally:
        os.umask(old_mask)
    listener.listen(64)
    listener.settimeout(0.2)

    def watch_stdin() -> None:
        sys.stdin.read()  # returns when the parent closes the pipe (or dies)
        stopping.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    say({"ready": True, "port": port, "interfaces": interfaces, "server_pid": server.pid})
    try:
        while not stopping.is_set() and server.poll() is None:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=_relay, args=(client, port), daemon=True).start()
    finally:
        listener.close()
        try:
            os.unlink(args.socket)
        except FileNotFoundError:
            pass
        if server.poll() is None:
            os.kill(server.pid, signal.SIGTERM)  # by its PID, then wait for it
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(server.pid, signal.SIGKILL)
                server.wait()
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
