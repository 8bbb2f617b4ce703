"""Runs inside a private network namespace: starts ``tritonserver`` there and relays a Unix
socket to its SageMaker port on the namespace's loopback.

Started by :mod:`ml_platform_cli.local_server` as ``unshare --net <python> _netns_relay.py
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
import ctypes
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

# Linux ABI constants (linux/sched.h, linux/mount.h, linux/prctl.h, asm/unistd_64.h).
_CLONE_NEWNS, _CLONE_NEWPID = 0x00020000, 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 1024, 2048, 1 << 21
_MNT_DETACH = 2
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP, _PR_SET_PDEATHSIG = 38, 24, 1
_SYS_PIVOT_ROOT = 155  # x86_64 (the bundled tritonserver is an x86_64 binary)
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
#: The user the server runs as when the relay is real root: nobody (Debian/Ubuntu uid/gid).
NOBODY = 65534
#: What the confined server sees of the host besides the paths it is given: the system's
#: programs and libraries (read-only), the dynamic linker's cache and the user database.
SYSTEM_PATHS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/sys/devices/system/cpu",
)
_DEVICES = ("null", "zero", "full", "random", "urandom")


def die_with_parent(signal_number: int = signal.SIGKILL) -> None:
    """prctl(PR_SET_PDEATHSIG): the calling process gets ``signal_number`` when its parent
    dies, so no server outlives a killed relay (kept across exec; Linux only)."""
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


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    _check(
        _libc().mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {source} on {target}",
    )


def _locked_flags(path: str) -> int:
    """The flags of the mount holding ``path`` that a read-only remount must keep (in a
    user namespace the kernel refuses to clear them)."""
    flags = os.statvfs(path).f_flag
    out = 0
    for st, ms in (
        (os.ST_NOEXEC, _MS_NOEXEC),
        (os.ST_NOATIME, _MS_NOATIME),
        (os.ST_NODIRATIME, _MS_NODIRATIME),
        (os.ST_RELATIME, _MS_RELATIME),
    ):
        if flags & st:
            out |= ms
    return out


def _bind_read_only(source: str, root: str) -> None:
    """``source`` at the same path under ``root``, read-only, nosuid, nodev (a symbolic
    link is copied as a link, its target bound too)."""
    target = root + source
    if os.path.islink(source):
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        if not os.path.lexists(target):
            os.symlink(os.readlink(source), target)
        resolved = os.path.realpath(source)
        if os.path.exists(resolved) and not os.path.lexists(root + resolved):
            _bind_read_only(resolved, root)
        return
    if os.path.isdir(source):
        os.makedirs(target, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        with open(target, "a"):
            pass
    _mount(source, target, None, _MS_BIND | _MS_REC)
    flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
    _mount(None, target, None, flags | _locked_flags(source))


def enter_jail(root: str, read_only: list[str]) -> None:
    """In a new mount namespace, make ``root`` (an empty folder) a tmpfs holding only
    :data:`SYSTEM_PATHS` and ``read_only`` (bound read-only at their own paths), a private
    ``/dev`` (null, zero, full, random, urandom; ``/dev/shm`` for the Python backend's shared
    memory), ``/proc`` of the caller's PID namespace and a ``/tmp``; then pivot into it, so
    nothing else of the host's file systems is reachable."""
    _check(_libc().unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing propagates back to the host
    _mount("jail", root, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=16m")
    dev = root + "/dev"
    os.makedirs(dev, mode=0o755, exist_ok=True)
    _mount("dev", dev, "tmpfs", _MS_NOSUID | _MS_NOEXEC, "mode=0755,size=64k")
    for name in _DEVICES:
        with open(f"{dev}/{name}", "a"):
            pass
        _mount(f"/dev/{name}", f"{dev}/{name}", None, _MS_BIND)
    for folder in (f"{dev}/shm", f"{root}/tmp"):  # shared memory, scratch: writable by all
        os.makedirs(folder, exist_ok=True)
        _mount("tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=1777")
    # After /tmp's tmpfs, so that a work folder under /tmp shows through it.
    for path in (*SYSTEM_PATHS, *map(os.path.abspath, read_only)):
        if os.path.lexists(path):
            _bind_read_only(path, root)
    os.makedirs(root + "/proc", mode=0o555, exist_ok=True)
    _mount("proc", root + "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    _mount(None, root, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    os.chdir(root)
    _check(_libc().syscall(_SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    _check(_libc().umount2(b".", _MNT_DETACH), "umount the old root")
    os.chdir("/")


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def drop_privileges() -> None:
    """No way back to privilege: as real root, become nobody (no groups); in a user namespace
    (root mapped to the operator), give up every capability. Either way no_new_privs is set,
    so no setuid file or file capability gives any back."""
    libc = _libc()
    with open("/proc/self/uid_map", "rb") as handle:
        mapped = handle.read().decode().split()
    real_root = mapped[:3] == ["0", "0", "4294967295"]
    for cap in range(64):  # the bounding set: nothing can be regained by exec
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break  # EINVAL past the last capability this kernel knows
    if real_root:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)  # clears every capability too
    else:
        data = (_CapData * 2)()
        header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
        _check(libc.capset(ctypes.byref(header), data), "capset")
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def jail_main(argv: list[str]) -> int:
    """``--jail ROOT PID_FD [--ro PATH]... -- COMMAND...``: run COMMAND as PID 1 of a new
    PID namespace, in a new mount namespace that shows it only ``ROOT``'s confined tree
    (:func:`enter_jail`), without privileges (:func:`drop_privileges`). Writes the server's
    PID (as this side sees it) to ``PID_FD``, passes SIGTERM/SIGINT on and exits with its
    status."""
    parser = argparse.ArgumentParser(prog="_netns_relay.py --jail")
    parser.add_argument("root")
    parser.add_argument("pid_fd", type=int)
    parser.add_argument("--ro", action="append", default=[])
    split = argv.index("--") if "--" in argv else len(argv)
    args, command = parser.parse_args(argv[:split]), argv[split + 1 :]
    _check(_libc().unshare(_CLONE_NEWPID), "unshare(CLONE_NEWPID)")
    child = os.fork()
    if child == 0:  # PID 1 of the new namespace
        try:
            os.close(args.pid_fd)
            enter_jail(args.root, args.ro)
            drop_privileges()
            die_with_parent()  # after setuid, which clears it
            os.execve(command[0], command, dict(os.environ))
        except BaseException as error:
            print(f"confinement failed: {error!r}", file=sys.stderr, flush=True)
        os._exit(126)
    os.write(args.pid_fd, f"{child}\n".encode())
    os.close(args.pid_fd)

    def forward(number: int, _frame: object) -> None:
        try:
            os.kill(child, number)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status) & 0xFF


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--jail"]:
        return jail_main(argv[1:])
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", required=True, help="Unix socket to create (mode 0600)")
    parser.add_argument("--log", required=True, help="file for the server's stdout and stderr")
    parser.add_argument("--env-json", required=True, help="environment of the server, as JSON")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument(
        "--jail-root",
        help="run the server confined (see jail_main), in this empty folder's tmpfs",
    )
    parser.add_argument(
        "--ro", action="append", default=[], help="a path the confined server may read"
    )
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
    pid_read = pid_write = -1
    if args.jail_root:
        pid_read, pid_write = os.pipe()
        ro = [flag for path in args.ro for flag in ("--ro", path)]
        jail = [sys.executable, "-I", os.path.abspath(__file__), "--jail", args.jail_root]
        command = [*jail, str(pid_write), *ro, "--", *command]
    server = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        stdin=subprocess.DEVNULL,
        preexec_fn=die_with_parent,
        pass_fds=(pid_write,) if args.jail_root else (),
    )
    server_pid = server.pid
    if args.jail_root:
        os.close(pid_write)
        with os.fdopen(pid_read, "rb") as pids:
            line = pids.readline().strip()
        if not line:  # the jail could not make its PID namespace
            server.wait()
            say({"error": f"the server could not be confined; see {args.log}"})
            return 1
        server_pid = int(line)
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
    say({"ready": True, "port": port, "interfaces": interfaces, "server_pid": server_pid})
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
