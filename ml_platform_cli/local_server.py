"""A real Triton server with SageMaker's multi-model front end, on this machine's CPU.

The server is the ``tritonserver`` binary that PyPI's ``nvidia-pytriton`` wheel bundles
(:data:`PYTRITON_VERSION`: Triton 2.51, release :data:`LOCAL_TRITON_RELEASE`), built with the
SageMaker front end and the Python backend, with no other backend. It is started with the flags
the SageMaker Triton container's ``serve`` script uses for a multi-model endpoint
(:data:`SAGEMAKER_MME_FLAGS`), and archives are loaded, invoked and unloaded through the same
HTTP routes SageMaker's model management calls.

What it checks, and what not: release 24.10 runs the SageMaker front end's load/invoke/unload
contract and the Python-backend contract of the archives' Python models. It is not the
endpoint's release (see ``inference.triton_version``), has no GPU and no TensorRT, ONNX
Runtime, TensorFlow or DALI backend: :mod:`ml_platform.triton.standins` replaces the steps it
can run on CPU (ONNX Runtime for ONNX and TensorRT steps, DALI's CPU operators for a
Python-defined DALI model) and reports the others as not exercised.

Confinement: the SageMaker front end listens on every interface (it has no address flag), and
24.10 predates the fix for CVE-2025-23319/23320/23334 (NVIDIA security bulletin 5687:
https://nvidia.custhelp.com/app/answers/detail/a_id/5687). So the server runs in a private
network namespace whose only interface is loopback (``unshare --net``; unprivileged users get
one with ``--user --map-root-user``), and clients reach it only through an owner-only Unix
socket (:mod:`ml_platform_cli._netns_relay`). If no namespace can be made, it does not start.
Archives hold code (Python models), so the server also runs in its own mount and PID
namespaces, sees only the system's programs, the server environment and the work folder's
unpacked archives (all read-only), and runs without privileges (``nobody`` under root): see
``_netns_relay.jail_main`` and docs/security.md. Serve only archives you trust.
The HTTP, gRPC and metrics front ends stay off, as on the endpoint, so the shared-memory
registration APIs of that chain are not served at all.

The server environment is a venv of its own (``make triton-env``: ``.venv-triton`` from
``requirements-triton.txt``), because the wheel and the Python backend stub of these releases
need numpy < 2 (pybind11 2.10; fixed in 24.11 by
https://github.com/triton-inference-server/python_backend/pull/384). It also holds the
stand-ins' runtimes, which the stub imports: ONNX Runtime and DALI (``ServerEnv.runtimes``).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ml_platform.triton.standins import RUNTIME_MODULES

#: The PyPI wheel that bundles the server (pinned in requirements-triton.txt).
PYTRITON_VERSION = "0.7.0"
#: Its Triton: 2.51, i.e. NGC/SageMaker release 24.10 (PyTriton 0.7.0 release notes:
#: https://github.com/triton-inference-server/pytriton/blob/main/CHANGELOG.md).
LOCAL_TRITON_RELEASE = "24.10"
#: The venv ``make triton-env`` creates, relative to the project.
DEFAULT_SERVER_ENV = ".venv-triton"
#: The flags of the SageMaker Triton container's ``serve`` script in multi-model mode
#: (https://github.com/triton-inference-server/server/blob/main/docker/sagemaker/serve):
#: only the SageMaker front end, explicit model control, namespacing, verbose logs, and the
#: Python backend's shared-memory sizes (16 MiB default, 1 MiB growth).
SAGEMAKER_MME_FLAGS = (
    "--allow-sagemaker=true",
    "--allow-grpc=false",
    "--allow-http=false",
    "--allow-metrics=false",
    "--model-control-mode=explicit",
    "--model-namespacing=true",
    "--log-verbose=true",
    "--backend-config=python,shm-default-byte-size=16777216",
    "--backend-config=python,shm-growth-byte-size=1048576",
)
RELAY_SCRIPT = Path(__file__).resolve().parent / "_netns_relay.py"
START_TIMEOUT = 60.0
#: The header SageMaker puts the request's TargetModel in (sagemaker_server.cc).
TARGET_MODEL_HEADER = "X-Amzn-SageMaker-Target-Model"
READY_NOTE = (
    "Local Triton {release} (nvidia-pytriton {pytriton}) with SageMaker's multi-model front end, "
    "on CPU. It checks the SageMaker front end's load/invoke/unload contract and the Python "
    "backend's, not the endpoint's release (inference.triton_version). Release {release} "
    "predates the fix for CVE-2025-23319/23320/23334, so it runs in a private network "
    "namespace (loopback only), reachable only through the owner-only socket {socket}; its "
    "HTTP, gRPC and metrics front ends (and with them shared-memory registration) are off. "
    "Archives' Python code runs confined (own mount and PID namespaces, read-only files, no "
    "privileges); serve only archives you trust."
)


def model_hash(target_model: str) -> str:
    """The ``model_name`` SageMaker sends for an archive: a hash of its key (any stable,
    path-safe name will do; SageMaker's own is opaque)."""
    import hashlib

    return hashlib.sha256(target_model.encode()).hexdigest()[:32]


class LocalServerError(RuntimeError):
    """The local server cannot be started or answered unexpectedly."""


@dataclass(frozen=True)
class ServerEnv:
    """Where the bundled server and its Python live (found by asking the env's Python)."""

    python: Path
    python_version: str  # "3.11"
    base_prefix: Path
    libdir: Path  # holds libpython<ver>.so, which the stub links against
    site_packages: Path
    pytriton: Path  # .../site-packages/pytriton
    runtimes: dict[str, bool]  # the stand-ins' runtimes importable by the stub
    # (standins.RUNTIME_MODULES: onnxruntime, dali)

    @property
    def tritonserver(self) -> Path:
        return self.pytriton / "tritonserver" / "bin" / "tritonserver"

    @property
    def libs(self) -> Path:  # the wheel's vendored shared libraries (auditwheel)
        return self.pytriton.parent / "nvidia_pytriton.libs"

    @property
    def stub(self) -> Path:
        return (
            self.pytriton
            / "tritonserver"
            / "python_backend_stubs"
            / self.python_version
            / "triton_python_backend_stub"
        )


_PROBE = """
import importlib.util, json, sys, sysconfig
def has(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # nvidia.dali without the nvidia namespace
        return False
RUNTIMES = json.loads(sys.argv[1])  # standins.RUNTIME_MODULES
spec = importlib.util.find_spec("pytriton")
print(json.dumps({
    "version": "%d.%d" % sys.version_info[:2],
    "base_prefix": sys.base_prefix,
    "libdir": sysconfig.get_config_var("LIBDIR"),
    "ldlibrary": sysconfig.get_config_var("LDLIBRARY"),
    "site": sysconfig.get_paths()["purelib"],
    "pytriton": list(spec.submodule_search_locations)[0] if spec else None,
    "numpy": (lambda s: s and __import__("numpy").__version__)(importlib.util.find_spec("numpy")),
    "runtimes": {name: has(m) for name, m in RUNTIMES.items()},
}))
"""


def find_server_env(env_dir: str | Path) -> ServerEnv:
    """Check ``env_dir`` (a venv made by ``make triton-env``) and describe it.

    Raises:
        LocalServerError: Not Linux x86_64, no such venv, no pytriton in it, numpy 2 in it
            (the stub of 24.10 crashes on it), or no shared libpython for the stub.
    """
    import platform

    if sys.platform != "linux" or platform.machine() != "x86_64":
        raise LocalServerError(
            f"the bundled tritonserver is a Linux x86_64 binary; this is {sys.platform} "
            f"{platform.machine()}"
        )
    # Resolved: the confined server sees only the folders bound into its root, and a venv
    # reached through a link (a clone's .venv-triton -> elsewhere) is bound at its real path.
    folder = Path(env_dir).resolve()
    python = folder / "bin" / "python"
    if not python.exists():
        raise LocalServerError(
            f"no server environment at {folder} (create it with `make triton-env`, or "
            f"python3 -m venv {folder} && {folder}/bin/pip install '/path/to/cdk-ml-platform[local]')"
        )
    probe = subprocess.run(
        [str(python), "-c", _PROBE, json.dumps(RUNTIME_MODULES)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": os.environ.get("PATH", "")},
    )
    if probe.returncode != 0:
        raise LocalServerError(f"{python} failed: {probe.stderr.strip()[-500:]}")
    info = json.loads(probe.stdout)
    problems = []
    if not info["pytriton"]:
        problems.append(f"nvidia-pytriton=={PYTRITON_VERSION} is not installed in {folder}")
    if info["numpy"] is None or int(info["numpy"].split(".")[0]) >= 2:
        problems.append(
            f"{folder} has numpy {info['numpy']}: the Python backend stub of Triton "
            f"{LOCAL_TRITON_RELEASE} needs numpy < 2 (python_backend PR 384 fixed it in 24.11)"
        )
    libdir = Path(info["libdir"] or "")
    if not (libdir / f"libpython{info['version']}.so.1.0").exists():
        problems.append(
            f"no shared libpython{info['version']}.so in {libdir}: the Python backend stub "
            "links against it (build Python with --enable-shared)"
        )
    if problems:
        raise LocalServerError("; ".join(problems))
    env = ServerEnv(
        python=python,
        python_version=info["version"],
        base_prefix=Path(info["base_prefix"]),
        libdir=libdir,
        site_packages=Path(info["site"]),
        pytriton=Path(info["pytriton"]),
        runtimes=info["runtimes"],
    )
    if not env.stub.exists():
        raise LocalServerError(
            f"nvidia-pytriton has no Python backend stub for "
            f"Python {env.python_version} ({env.stub})"
        )
    return env


def namespace_command() -> list[str]:
    """``unshare`` arguments for a private network namespace (root or user namespace)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        raise LocalServerError("`unshare` (util-linux) is needed for a private network namespace")
    return (
        [unshare, "--net"] if os.geteuid() == 0 else [unshare, "--user", "--map-root-user", "--net"]
    )


def can_make_namespace() -> str | None:
    """``None`` if a private network namespace can be made here, else why not."""
    try:
        command = namespace_command()
    except LocalServerError as error:
        return str(error)
    # The relay makes the mount and PID namespaces of the confined server itself (libc).
    command = [*command, "--mount", "--pid", "--fork"]
    result = subprocess.run([*command, "true"], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return f"cannot create private namespaces ({' '.join(command)}): " + (
            result.stderr.strip() or f"exit code {result.returncode}"
        )
    return None


def _relay_dies_with_us() -> None:
    """The relay gets SIGTERM (and stops the server by PID) if this process dies first."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def request(
    socket_path: str | Path,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 120.0,
) -> Reply:
    """One HTTP request to the SageMaker front end through the relay's Unix socket."""
    connection = _UnixHTTPConnection(str(socket_path), timeout)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return Reply(
            response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        )
    finally:
        connection.close()


#: The longest Unix socket path Linux binds (``sun_path`` is 108 bytes with its NUL).
MAX_SOCKET_PATH_BYTES = 107


class LocalTriton:
    """One server process; start it with :meth:`start`, stop it with :meth:`stop` (by PID)."""

    def __init__(self, env: ServerEnv, workdir: str | Path) -> None:
        self.env = env
        self.workdir = Path(workdir)
        self.socket_path = self.workdir / "triton.sock"
        self.log_path = self.workdir / "tritonserver.log"
        self.port: int | None = None
        self.server_pid: int | None = None
        self.interfaces: list[str] = []
        self._relay: subprocess.Popen[str] | None = None

    @property
    def relay_pid(self) -> int | None:
        return self._relay.pid if self._relay is not None else None

    def _backend_dir(self) -> Path:
        """backends/python with the stub for the env's Python (as pytriton lays it out)."""
        python = self.workdir / "backends" / "python"
        python.mkdir(parents=True, exist_ok=True)
        source = self.env.pytriton / "tritonserver" / "backends" / "python"
        for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
            shutil.copy2(source / name, python / name)
        shutil.copy2(self.env.stub, python / "triton_python_backend_stub")
        return python.parent

    def _server_env(self) -> dict[str, str]:
        return {
            "PATH": f"{self.env.python.parent}:/usr/bin:/bin",
            "HOME": "/tmp",  # the confined server's only writable folder besides /dev/shm
            "LD_LIBRARY_PATH": f"{self.env.libs}:{self.env.libdir}",
            # The stub embeds the env's libpython; it imports numpy (< 2) and the
            # stand-ins' runtimes from the env's site-packages.
            "PYTHONHOME": str(self.env.base_prefix),
            "PYTHONPATH": str(self.env.site_packages),
            "PYTHONNOUSERSITE": "1",
            "OMP_NUM_THREADS": "1",
        }

    def command(self, repository: Path, backends: Path) -> list[str]:
        return [
            str(self.env.tritonserver),
            *SAGEMAKER_MME_FLAGS,
            "--sagemaker-port={port}",  # replaced by a free port inside the namespace
            f"--model-repository={repository}",  # an empty dummy, as the serve script's
            f"--backend-directory={backends}",
        ]

    @property
    def models_dir(self) -> Path:
        """The only folder of archives the server can see (read-only): unpack them here."""
        return self.workdir / "models"

    def model_folder(self, name: str) -> Path:
        """``models_dir / name`` (not created): where to unpack an archive to load it."""
        return self.models_dir / name

    def read_only_paths(self, repository: Path, backends: Path) -> list[str]:
        """Everything the confined server may read besides the system's programs and
        libraries (``_netns_relay.SYSTEM_PATHS``): the server environment and the work
        folder's backends, empty repository and models; nothing is writable."""
        env = self.env
        # The venv's root, not only bin/: its pyvenv.cfg is how the stub's embedded Python
        # finds the venv's site-packages (from `python3` on PATH).
        paths = [env.python.parent.parent, env.base_prefix, env.libdir, env.site_packages]
        paths += [repository, backends, self.models_dir]
        return list(dict.fromkeys(os.path.abspath(p) for p in paths))

    def start(self, timeout: float = START_TIMEOUT) -> None:
        # Linux keeps a Unix socket's path in 108 bytes with its terminating NUL (unix(7),
        # sun_path): a deeper work folder would fail later with "AF_UNIX path too long".
        if len(os.fsencode(self.socket_path)) > MAX_SOCKET_PATH_BYTES:
            raise LocalServerError(
                f"work folder {self.workdir} is too deep for the server's socket "
                f"({len(os.fsencode(self.socket_path))} bytes, at most {MAX_SOCKET_PATH_BYTES}): "
                "use a shorter one (e.g. a shorter TMPDIR)"
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        repository = self.workdir / "empty-repository"
        repository.mkdir(exist_ok=True)
        # Readable by the server's user (nobody, under root); the work folder stays owner-only.
        self.models_dir.mkdir(mode=0o755, exist_ok=True)
        jail_root = self.workdir / "confined-root"
        jail_root.mkdir(exist_ok=True)
        backends = self._backend_dir()
        for folder in (repository, backends, backends / "python", self.models_dir):
            folder.chmod(0o755)
        env_file = self.workdir / "server-env.json"
        env_file.write_text(json.dumps(self._server_env()), encoding="utf-8")
        relay = [
            *namespace_command(),
            str(self.env.python),
            "-I",
            str(RELAY_SCRIPT),
            "--socket",
            str(self.socket_path),
            "--log",
            str(self.log_path),
            "--env-json",
            str(env_file),
            "--timeout",
            str(timeout),
            "--jail-root",
            str(jail_root),
            *[
                flag
                for path in self.read_only_paths(repository, backends)
                for flag in ("--ro", path)
            ],
            "--",
            *self.command(repository, backends),
        ]
        self._relay = subprocess.Popen(
            relay,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_relay_dies_with_us,
        )
        stdout, stderr = self._relay.stdout, self._relay.stderr
        assert stdout is not None and stderr is not None  # both PIPE above
        line = stdout.readline()
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            self._relay.wait(timeout=10)
            raise LocalServerError(
                f"the namespace relay failed to start: {line}{stderr.read()[-2000:]}"
            ) from None
        if "error" in message:
            self._relay.wait(timeout=10)
            raise LocalServerError(f"{message['error']}\n{self.log_tail()}")
        self.port, self.server_pid = message["port"], message["server_pid"]
        self.interfaces = message["interfaces"]
        deadline = time.monotonic() + timeout
        while self.request("GET", "/ping").status != 200:
            if time.monotonic() > deadline:
                self.stop()
                raise LocalServerError(f"/ping never answered 200\n{self.log_tail()}")
            time.sleep(0.1)

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 120.0,
    ) -> Reply:
        return request(self.socket_path, method, path, body, headers, timeout)

    def load(self, target_model: str, url: str | Path) -> Reply:
        """SageMaker's model load: ``POST /models {"model_name": <hash>, "url": <folder>}``
        with the archive key in ``X-Amzn-SageMaker-Target-Model``; Triton registers the
        folder as a repository and loads its ensemble under the ``TargetModel`` name."""
        body = json.dumps({"model_name": model_hash(target_model), "url": str(url)}).encode()
        return self.request(
            "POST",
            "/models",
            body,
            {"Content-Type": "application/json", TARGET_MODEL_HEADER: target_model},
        )

    def invoke(self, target_model: str, body: bytes, content_type: str) -> Reply:
        """SageMaker's invocation: ``POST /models/<hash>/invoke`` with the ``TargetModel``."""
        return self.request(
            "POST",
            f"/models/{model_hash(target_model)}/invoke",
            body,
            {"Content-Type": content_type, TARGET_MODEL_HEADER: target_model},
        )

    def unload(self, target_model: str) -> Reply:
        """SageMaker's unload: ``DELETE /models/<hash>``."""
        return self.request(
            "DELETE",
            f"/models/{model_hash(target_model)}",
            headers={TARGET_MODEL_HEADER: target_model},
        )

    def loaded(self) -> list[str]:
        """Hashes of the loaded models (``GET /models``)."""
        reply = self.request("GET", "/models")
        return [m["modelName"] for m in json.loads(reply.body).get("models", []) if m]

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM to the relay by its PID; it stops tritonserver by its PID and exits."""
        relay, self._relay = self._relay, None
        if relay is None or relay.poll() is not None:
            return
        os.kill(relay.pid, signal.SIGTERM)
        try:
            relay.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(relay.pid, signal.SIGKILL)
            relay.wait()
        for stream in (relay.stdin, relay.stdout, relay.stderr):
            if stream is not None:  # never: all three are PIPE
                stream.close()

    def __enter__(self) -> LocalTriton:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def invoke_local(
    socket_path: str | Path,
    target_model: str,
    body: bytes,
    content_type: str,
    timeout: float = 120.0,
) -> Reply:
    """``POST /models/<hash>/invoke`` through a running local server's socket."""
    return request(
        socket_path,
        "POST",
        f"/models/{model_hash(target_model)}/invoke",
        body,
        {"Content-Type": content_type, TARGET_MODEL_HEADER: target_model},
        timeout,
    )


def new_workdir() -> Path:
    """A fresh owner-only folder for the socket, logs and unpacked archives."""
    return Path(tempfile.mkdtemp(prefix="mlp-local-triton-"))
