"""``mlp models serve --local DIR``: serve a folder of archives on this machine's CPU through a
real Triton server's SageMaker multi-model front end, before anything is uploaded or paid for.

The server is the tritonserver bundled by nvidia-pytriton (Triton release 24.10), installed in a
venv of its own (``make triton-env``, or ``pip install '/path/to/cdk-ml-platform[local]'`` into a fresh
venv; Linux x86_64). Each archive is unpacked as SageMaker unpacks it and loaded with SageMaker's
``POST /models``; steps whose backend the bundle lacks run as CPU stand-ins or are reported as
not exercised. Call it with ``mlp invoke --local DIR``. Ctrl-C stops the server.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ml_platform_cli.aws import CliError, Context, Subcommands, doc_summary

if TYPE_CHECKING:
    from ml_platform.triton.kinds import EnsembleKind
    from ml_platform.triton.standins import Prepared

__all__ = ["ENV_VARIABLE", "STATE_FILE", "add_parser", "read_state", "run", "state_path"]

STATE_FILE = ".mlp-local-triton.json"
ENV_VARIABLE = "MLP_TRITON_ENV"


def add_parser(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        parents=parents,
        help="serve a folder of archives on this machine (real Triton, CPU)",
        description=doc_summary(__doc__),
    )
    p.add_argument(
        "--local",
        type=Path,
        required=True,
        metavar="DIR",
        help="folder of archives (*.tar.gz, e.g. mlp models package's --out) to "
        "serve on this machine only",
    )
    p.add_argument(
        "--server-env",
        type=Path,
        help=f"venv holding nvidia-pytriton (default: ${ENV_VARIABLE}, else "
        "./.venv-triton, which `make triton-env` creates)",
    )
    p.add_argument(
        "--plan-onnx",
        type=Path,
        help="the ONNX your TensorRT plans were built from: runs in their place "
        "(a plan only runs on its GPU); without it the plan is not exercised",
    )
    p.set_defaults(run=run)


def state_path(folder: Path) -> Path:
    return folder / STATE_FILE


def read_state(folder: Path) -> dict[str, Any]:
    """What ``mlp models serve --local DIR`` wrote for ``mlp invoke --local DIR``."""
    path = state_path(folder)
    try:
        state: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CliError(
            f"--local {folder}: no local server is serving it (start one with "
            f"`mlp models serve --local {folder}`)"
        ) from None
    try:
        os.kill(state["relay_pid"], 0)
    except (ProcessLookupError, KeyError):
        raise CliError(
            f"--local {folder}: the local server that served it has stopped "
            f"(start it again with `mlp models serve --local {folder}`)"
        ) from None
    return state


def _server_env_dir(args: argparse.Namespace) -> Path:
    from ml_platform_cli.local_server import DEFAULT_SERVER_ENV

    server_env: Path | None = args.server_env
    if server_env is not None:
        return server_env
    return Path(os.environ.get(ENV_VARIABLE) or DEFAULT_SERVER_ENV)


def _kind(prepared: Prepared) -> EnsembleKind | None:
    """The kind of the archive's ensemble, looked up by its name in the table of kinds (``None``
    for an ensemble this repository does not build, or one that cannot run here)."""
    if prepared.ensemble is None:
        return None
    from ml_platform.triton.kinds import kind_of_ensemble

    return kind_of_ensemble(prepared.ensemble)


def run(ctx: Context, args: argparse.Namespace) -> int:
    from ml_platform.triton.standins import prepare
    from ml_platform_cli.local_server import (
        LOCAL_TRITON_RELEASE,
        PYTRITON_VERSION,
        READY_NOTE,
        LocalServerError,
        LocalTriton,
        can_make_namespace,
        find_server_env,
        new_workdir,
    )

    folder = args.local
    archives = sorted(folder.glob("*.tar.gz")) if folder.is_dir() else []
    if not archives:
        raise CliError(
            f"--local {folder}: no *.tar.gz archives in it "
            "(build them with `mlp models package --out DIR`)"
        )
    if args.plan_onnx is not None and not args.plan_onnx.is_file():
        raise CliError(f"--plan-onnx {args.plan_onnx}: not a file")
    try:
        env = find_server_env(_server_env_dir(args))
    except LocalServerError as error:
        raise CliError(str(error)) from None
    problem = can_make_namespace()
    if problem:  # never fall back to a server that the network could reach
        raise CliError(f"refusing to start the local server: {problem}")
    workdir = new_workdir()
    server = LocalTriton(env, workdir)
    print(
        READY_NOTE.format(
            release=LOCAL_TRITON_RELEASE, pytriton=PYTRITON_VERSION, socket=server.socket_path
        ),
        flush=True,
    )
    try:
        server.start()
    except LocalServerError as error:
        raise CliError(f"the local server did not start: {error}") from None
    stop = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop.set())
    try:
        loaded: dict[str, dict[str, Any]] = {}
        kinds: dict[str, EnsembleKind | None] = {}
        failures = 0
        for archive in archives:
            ready = prepare(
                archive,
                server.model_folder(archive.name),
                plan_onnx=args.plan_onnx,
                server_has=env.runtimes,
            )
            print(ready.report(), flush=True)
            if not ready.loadable:
                print("  not loaded: no step of it can run here", flush=True)
                continue
            reply = server.load(archive.name, ready.root)
            if reply.status != 200:
                failures += 1
                print(f"  failed to load (HTTP {reply.status}): {reply.text()[:2000]}", flush=True)
                continue
            kind = _kind(ready)
            kinds[archive.name] = kind
            loaded[archive.name] = {"complete": ready.complete, "kind": kind and kind.name}
            print(
                "  loaded"
                + (
                    ""
                    if ready.complete
                    else " (its ensemble is not exercised: invoke is not possible)"
                ),
                flush=True,
            )
        state = {
            "socket": str(server.socket_path),
            "relay_pid": server.relay_pid,
            "server_pid": server.server_pid,
            "release": LOCAL_TRITON_RELEASE,
            "archives": loaded,
        }
        state_path(folder).write_text(json.dumps(state, indent=2), encoding="utf-8")
        from ml_platform.triton.kinds import TEXT

        runnable = {kinds[name] for name, info in loaded.items() if info["complete"]}
        # One kind runs end to end: its example; otherwise the text one.
        only = runnable.pop() if len(runnable) == 1 else None
        example = (only or TEXT).cli.invoke_example
        print(
            f"ready: {len(loaded)} of {len(archives)} archives loaded"
            + (f", {failures} failed" if failures else "")
            + f"; try `mlp invoke --local {folder} {example}`; Ctrl-C stops the server; "
            f"server log: {server.log_path}",
            flush=True,
        )
        while not stop.wait(1.0):
            pass
    finally:
        state_path(folder).unlink(missing_ok=True)
        server.stop()
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)  # the unpacked archives and the log
        print("local server stopped", file=sys.stderr)
    return 0
