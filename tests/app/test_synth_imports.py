"""What `cdk synth` loads: only what the app uses (imports dominate the synthesis time, make
bench). The TorchX component and the CLI's HTTP client are for rendering jobs and fetching
charts, never for synthesis."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ml_platform.config import Settings

REPO = Path(__file__).resolve().parents[2]

NOT_AT_SYNTH = (
    "torchx",
    "urllib.request",
    "boto3",
    "botocore",
    # the tooling: the CLI (with its local server) and the cost estimator, off by default
    "ml_platform_cli",
    "ml_platform_pricing",
)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )


@pytest.fixture(scope="module")
def after_app_import() -> dict[str, Any]:
    """What a fresh interpreter holds once app.py (what `cdk synth` runs, up to building the
    app) and the stacks are imported: one process for the tests below."""
    code = (
        "import json, sys, threading\n"
        "sys.path.insert(0, '.')\n"
        "import app\n"
        "import ml_platform.stacks.accelerators, ml_platform.training.jobs\n"
        "from ml_platform._settings_parse import adapter\n"
        "print(json.dumps({\n"
        f"    'loaded': [m for m in {list(NOT_AT_SYNTH)!r} if m in sys.modules],\n"
        "    'validators': adapter.cache_info().currsize,\n"
        "    'cdk_nag': 'cdk_nag' in sys.modules,\n"
        "    'threads': [t.name for t in threading.enumerate()],\n"
        "}))"
    )
    result: dict[str, Any] = json.loads(_run(code).stdout.strip().splitlines()[-1])
    return result


def test_the_app_module_and_the_stacks_load_no_render_or_cli_modules(
    after_app_import: dict[str, Any],
) -> None:
    assert after_app_import["loaded"] == []


def test_the_settings_parser_is_built_while_cdk_nag_loads_and_no_thread_outlives_the_import(
    after_app_import: dict[str, Any],
) -> None:
    # ml_platform._cdk_nag builds pydantic's validators (one per member of Settings) on a
    # thread during cdk-nag's assembly load: once ml_platform.app is imported, they are cached
    # and the thread is gone.
    members = len(dataclasses.fields(Settings))
    assert after_app_import["validators"] == members and after_app_import["cdk_nag"]
    assert "settings-parser" not in after_app_import["threads"]


def test_a_failure_on_the_builder_thread_is_left_to_the_main_thread():
    # The same work runs again in settings_from_app, which raises there; the import stays quiet.
    code = (
        "import ml_platform._settings_parse as parse\n"
        "def fail(tp):\n"
        "    raise RuntimeError('validator build failed')\n"
        "parse.adapter = fail\n"
        "import ml_platform.app\n"
        "print('imported')"
    )
    result = _run(code)
    assert result.stdout.strip().splitlines()[-1] == "imported"
    assert "validator build failed" not in result.stderr
