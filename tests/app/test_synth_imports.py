"""What `cdk synth` loads: only what the app uses (imports dominate the synthesis time, make
bench). The TorchX component and the CLI's HTTP client are for rendering jobs and fetching
charts, never for synthesis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

NOT_AT_SYNTH = ("torchx", "urllib.request", "boto3", "botocore", "ml_platform.cli.aws")


def test_the_app_module_and_the_stacks_load_no_render_or_cli_modules() -> None:
    code = (
        "import sys, json\n"
        "sys.path.insert(0, '.')\n"
        "import app\n"  # app.py: what `cdk synth` runs, up to building the app
        "import ml_platform.stacks.accelerators, ml_platform.training.jobs\n"
        f"print(json.dumps([m for m in {list(NOT_AT_SYNTH)!r} if m in sys.modules]))"
    )
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []
