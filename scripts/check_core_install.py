"""Check the core distribution the way a user gets it (`make check-core`, run by `.ci/run`).

1. Build the sdist and the wheel (``python -m build``): the sdist holds no tests or examples,
   both carry the Apache-2.0 LICENSE.
2. Install the wheel WITHOUT extras into a fresh venv (pinned by requirements-core.txt): the
   installed distributions must be exactly the core closure (no boto3, tritonclient, torchx,
   kubernetes, docker...).
3. Synthesize every app of examples/ with that venv's Python, offline, with cdk-nag on.
4. Print the installed size of the venv's site-packages.

Too slow for the pytest budget (a venv and ~300 MB of wheels), so it is its own CI step.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETUP_TOOLS = {"pip", "setuptools", "wheel"}
TOP_LEVEL = ("ml_platform", "ml_platform_cli", "ml_platform_pricing")


def _run(*args: str | Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], check=True, text=True, **kwargs)


def _name(requirement: str) -> str:
    return re.split(r"[=<>\[;]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def core_pins() -> set[str]:
    lines = (ROOT / "requirements-core.txt").read_text().splitlines()
    return {_name(line) for line in lines if line.strip() and not line.startswith("#")}


def check_archives(dist: Path) -> Path:
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    with tarfile.open(sdist) as archive:
        names = [n.split("/", 1)[1] for n in archive.getnames() if "/" in n]
    leaked = [n for n in names if n.startswith(("tests/", "examples/", "scripts/"))]
    assert not leaked, f"sdist carries {leaked[:5]}"
    assert "LICENSE" in names, "sdist has no LICENSE"
    with zipfile.ZipFile(wheel) as archive:
        wheel_names = archive.namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in wheel_names), "wheel: LICENSE"
    assert not [n for n in wheel_names if n.startswith("tests/")], "wheel carries tests"
    # One distribution, three top-level packages: the construct library and, beside it, the
    # tooling (the CLI with the local server; the cost estimator with its price table).
    packages = {n.split("/", 1)[0] for n in wheel_names if n.endswith("/__init__.py")}
    assert packages == set(TOP_LEVEL), f"wheel packages: {sorted(packages)}"
    assert "ml_platform_pricing/prices.json" in wheel_names, "wheel: no price table"
    return wheel


def site_packages_bytes(env: Path) -> int:
    (site,) = env.glob("lib/python*/site-packages")
    return sum(p.stat().st_size for p in site.rglob("*") if p.is_file() and not p.is_symlink())


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="core-install-") as tmp:
        work = Path(tmp)
        dist = work / "dist"
        _run(sys.executable, "-m", "build", "--outdir", dist, ROOT, stdout=subprocess.DEVNULL)
        wheel = check_archives(dist)
        env = work / "venv"
        venv.EnvBuilder(with_pip=True).create(env)
        python = env / "bin" / "python"
        _run(
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-c",
            ROOT / "requirements-core.txt",
            wheel,
        )
        listed = json.loads(
            _run(python, "-m", "pip", "list", "--format=json", capture_output=True).stdout
        )
        installed = {_name(p["name"]) for p in listed} - SETUP_TOOLS - {"cdk-ml-platform"}
        expected = core_pins()
        assert installed == expected, (
            f"core install differs from requirements-core.txt: extra "
            f"{sorted(installed - expected)}, missing {sorted(expected - installed)}"
        )
        # The estimator needs nothing beyond the core (cost_annotations runs it at synth).
        _run(python, "-c", "import ml_platform_pricing.annotate", cwd=work)
        for example in sorted((ROOT / "examples").glob("*/app.py")):
            context = json.loads((example.parent / "cdk.json").read_text())["context"]
            outdir = work / "out" / example.parent.name
            code = (
                "import runpy, aws_cdk as cdk, ml_platform.app as a\n"
                "from cdk_nag import AwsSolutionsChecks\n"
                f"m = runpy.run_path({str(example)!r})\n"
                "app = a.new_app()\n"
                "m['build'](app)\n"
                "cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))\n"
                "app.synth()\n"
            )
            _run(
                python,
                "-c",
                code,
                cwd=work,
                env={
                    **os.environ,
                    "CDK_OUTDIR": str(outdir),
                    "CDK_CONTEXT_JSON": json.dumps(context),
                },
            )
            manifest = json.loads((outdir / "manifest.json").read_text())
            assert not manifest.get("missing"), f"{example}: wanted a context lookup"
            print(
                f"synthesized {example.parent.name}: "
                f"{len(list(outdir.glob('*.template.json')))} template(s)"
            )
        size = site_packages_bytes(env)
        print(
            f"core install: {len(installed)} distributions besides cdk-ml-platform, "
            f"site-packages {size / 2**20:.1f} MiB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
