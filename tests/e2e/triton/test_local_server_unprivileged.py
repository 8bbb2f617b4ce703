"""Local serving confinement for an operator who is not root (issue 34, finding 5).

CI runs as root, where the confined server runs as nobody (tests/e2e/triton/test_local_server.py
reads that from /proc). Here a forked child of this test drops to uid/gid 65534 with no groups
(or stays the test's own user when that is not root) and starts :class:`LocalTriton` as such an
operator would: ``unshare --user --map-root-user --net``, the relay's mount and PID namespaces,
its capability drop and no_new_privs, all real.

Observed: what /proc says of the server process (from this root test, outside its namespaces)
and what code inside it manages to do. Stand-in: tritonserver itself is replaced by a small
standard-library HTTP server run by the system's /usr/bin/python3, because the server
environment (.venv-triton, whose Python lives under /root, mode 0700) cannot be read by uid
65534; the confinement does not depend on which program runs inside it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from ml_platform_cli.local_server import (
    LocalTriton,
    ServerEnv,
    can_make_namespace,
    new_workdir,
)
from tests.helpers.confinement import CONFINED_WRITABLE, mount_options, proc_status, writable_mounts

UNPRIVILEGED = 65534
SYSTEM_PYTHON = Path("/usr/bin/python3")

#: The stand-in server: answers /ping, and /probe with what its code can reach.
STAND_IN = r"""
import ctypes, http.server, json, os, signal, sys

def attempt(call):
    try:
        call()
        return "allowed"
    except OSError as error:
        return type(error).__name__

def mount_tmpfs():
    os.makedirs("/tmp/m", exist_ok=True)
    if ctypes.CDLL(None, use_errno=True).mount(b"none", b"/tmp/m", b"tmpfs", 0, None) != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))  # EPERM: PermissionError

def probe(models):
    def write(path):
        with open(path, "w") as handle:
            handle.write("x")
    return {
        "write_models": attempt(lambda: write(os.path.join(models, "planted"))),
        "write_tmp": attempt(lambda: write("/tmp/scratch")),
        "write_root": attempt(lambda: write("/planted")),
        "chroot": attempt(lambda: os.chroot("/tmp")),
        "mount": attempt(mount_tmpfs),
        "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        "shadow": os.path.exists("/etc/shadow"),
        "home": os.path.exists("/home"),
        "work": os.path.exists(os.path.dirname(models)),
    }

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"{}" if self.path == "/ping" else json.dumps(probe(sys.argv[2])).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

# As tritonserver does: PID 1 of a namespace gets only the signals it handles.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
http.server.HTTPServer(("0.0.0.0", int(sys.argv[1])), Handler).serve_forever()
"""


class StandInServer(LocalTriton):
    """LocalTriton's real start (relay, namespaces, jail), with the stand-in as the server."""

    def _backend_dir(self) -> Path:
        backends = self.workdir / "backends"
        (backends / "python").mkdir(parents=True, exist_ok=True)
        return backends

    def command(self, repository: Path, backends: Path) -> list[str]:
        return [str(SYSTEM_PYTHON), "-I", "-c", STAND_IN, "{port}", str(self.models_dir)]


def _system_env() -> ServerEnv:
    return ServerEnv(
        python=SYSTEM_PYTHON,
        python_version="",
        base_prefix=Path("/usr"),
        libdir=Path("/usr/lib"),
        site_packages=Path("/usr/lib/python3/dist-packages"),
        pytriton=Path("/nonexistent/pytriton"),
        runtimes={},
    )


def _why_not() -> str | None:
    if shutil.which("unshare") is None:
        return "`unshare` (util-linux) is missing"
    if not SYSTEM_PYTHON.exists():
        return f"{SYSTEM_PYTHON} is missing (the stand-in server's Python, readable by nobody)"
    clone = Path("/proc/sys/kernel/unprivileged_userns_clone")  # Debian/Ubuntu kernels only
    if clone.exists() and clone.read_text().strip() == "0":
        return "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)"
    maximum = Path("/proc/sys/user/max_user_namespaces")
    if maximum.exists() and maximum.read_text().strip() == "0":
        return "user namespaces are disabled (user.max_user_namespaces=0)"
    return None


def _run_as_unprivileged(report_fd: int, stop_fd: int) -> None:
    """The forked child: drop to 65534, start the server, report, wait for the test, stop."""
    server = None
    try:
        if os.geteuid() == 0:  # CI: become an operator who is not root
            os.setgroups([])
            os.setgid(UNPRIVILEGED)
            os.setuid(UNPRIVILEGED)
        problem = can_make_namespace()  # e.g. AppArmor's restrict_unprivileged_userns
        if problem:
            os.write(report_fd, json.dumps({"skip": problem}).encode() + b"\n")
            os.close(report_fd)
            return
        server = StandInServer(_system_env(), new_workdir())
        server.start(timeout=10)
        probe = json.loads(server.request("GET", "/probe").body)
        message = {
            "server_pid": server.server_pid,
            "relay_pid": server.relay_pid,
            "interfaces": server.interfaces,
            "workdir": str(server.workdir),
            "models_dir": str(server.models_dir),
            "probe": probe,
        }
    except BaseException as error:  # reported to the test, which fails with it
        log = server.log_tail() if server is not None and server.log_path.exists() else ""
        message = {"error": f"{error!r}\n{log}"}
    os.write(report_fd, json.dumps(message).encode() + b"\n")
    os.close(report_fd)
    os.read(stop_fd, 1)  # the test closes its end when it has looked
    if server is not None:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


def test_non_root_operator_serves_confined_in_a_user_namespace() -> None:
    problem = _why_not()
    if problem:
        pytest.skip(problem)
    operator = UNPRIVILEGED if os.geteuid() == 0 else os.geteuid()  # run as is when not root
    report_read, report_write = os.pipe()
    stop_read, stop_write = os.pipe()
    child = os.fork()
    if child == 0:
        code = 1
        try:
            os.close(report_read)
            os.close(stop_write)
            _run_as_unprivileged(report_write, stop_read)
            code = 0
        finally:
            os._exit(code)
    os.close(report_write)
    os.close(stop_read)
    try:
        with os.fdopen(report_read) as report:
            message = json.loads(report.readline() or '{"error": "the child died silently"}')
        if "skip" in message:
            pytest.skip(f"uid {operator} cannot make the namespaces: {message['skip']}")
        assert "error" not in message, message["error"]
        pid = message["server_pid"]
        # Its own user, network, mount and PID namespaces (PID 1 in the last).
        for ns in ("user", "net", "mnt", "pid"):
            assert os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}"), ns
        assert message["interfaces"] == ["lo"]
        status = proc_status(pid)
        assert status["NSpid"].split("\t")[-1] == "1"
        # Root inside is the operator outside (uid_map 0 -> 65534, nothing else mapped).
        assert status["Uid"].split("\t") == [str(operator)] * 4
        assert Path(f"/proc/{pid}/uid_map").read_text().split() == ["0", str(operator), "1"]
        # No capability, none in the bounding set, no way to regain any by exec.
        assert (status["CapEff"], status["CapPrm"], status["CapBnd"], status["NoNewPrivs"]) == (
            "0" * 16,
            "0" * 16,
            "0" * 16,
            "1",
        )
        mounts = mount_options(pid)
        assert writable_mounts(pid) == CONFINED_WRITABLE
        assert mounts[message["models_dir"]][0] == "ro"
        # What the server's own code observes inside.
        probe = message["probe"]
        assert probe["write_tmp"] == "allowed"
        assert probe["write_models"] == "OSError"  # EROFS: the archives' folder is read-only
        assert probe["write_root"] == "OSError"  # EROFS: the tmpfs root is read-only
        # Root inside, but without capabilities: no chroot, no mount.
        assert (probe["chroot"], probe["mount"]) == ("PermissionError", "PermissionError")
        assert probe["pids"] == [1]  # sees no process of the host
        assert not probe["shadow"] and not probe["home"]
        assert probe["work"]  # the work folder shows only through the read-only models
        assert not (
            Path(f"/proc/{pid}/root") / message["workdir"].lstrip("/") / "triton.sock"
        ).exists()
    finally:
        os.close(stop_write)
        deadline = time.monotonic() + 30
        while os.waitpid(child, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(child, signal.SIGKILL)
                os.waitpid(child, 0)
                break
            time.sleep(0.05)
    if "server_pid" in message:  # gone once the relay has stopped it (reaped by init)
        gone = Path(f"/proc/{message['server_pid']}")
        deadline = time.monotonic() + 5
        while gone.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not gone.exists(), "the server outlived stop()"
