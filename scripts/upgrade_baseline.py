"""Write the upgrade baseline of a release: its normalized templates under
``tests/upgrade/baseline/<version>/``, which the upgrade test (tests/upgrade) compares every
later change against.

At release time, on the release commit (docs/development.md, "Releasing")::

    .venv/bin/python scripts/upgrade_baseline.py

synthesizes this tree with cdk.json's settings (the shipped ones) and writes the baseline of
``ml_platform.__version__``. ``--cdk-out DIR --version V --source TEXT`` writes one from
templates synthesized elsewhere (how 0.1.0's was made from commit 2c9d4bf).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.upgrade.checks import normalized_template  # noqa: E402

BASELINES = ROOT / "tests" / "upgrade" / "baseline"


def write(cdk_out: Path, version: str, source: str, *, force: bool = False) -> Path:
    """Normalize every ``<prefix>-<Stack>.template.json`` of ``cdk_out`` into the baseline
    folder of ``version``; returns the folder."""
    folder = BASELINES / version
    if folder.exists() and not force:
        raise SystemExit(f"{folder} exists: a release's baseline is not rewritten (--force)")
    templates = sorted(cdk_out.glob("*.template.json"))
    if not templates:
        raise SystemExit(f"{cdk_out}: no *.template.json")
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.template.json"):
        old.unlink()
    for path in templates:
        stack = path.name.removesuffix(".template.json").split("-", 1)[1]
        template = normalized_template(json.loads(path.read_text()))
        (folder / f"{stack}.template.json").write_text(
            json.dumps(template, indent=1, sort_keys=True) + "\n"
        )
    (folder / "SOURCE").write_text(source.strip() + "\n")
    return folder


def synthesize(outdir: Path) -> None:
    """This tree's app with cdk.json's settings (cdk-nag off: it only adds metadata)."""
    from tests.support import synthesize as synth

    synth(outdir, nag=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cdk-out", type=Path, help="templates already synthesized")
    parser.add_argument("--version", help="default: ml_platform.__version__")
    parser.add_argument("--source", help="what was synthesized (default: this tree's HEAD)")
    parser.add_argument("--force", action="store_true", help="replace an existing baseline")
    args = parser.parse_args(argv)
    import subprocess

    import ml_platform

    version = args.version or ml_platform.__version__
    source = args.source or (
        "commit "
        + subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        + ", cdk.json's settings"
    )
    if args.cdk_out:
        folder = write(args.cdk_out, version, source, force=args.force)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            synthesize(Path(tmp))
            folder = write(Path(tmp), version, source, force=args.force)
    print(f"wrote {folder.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
