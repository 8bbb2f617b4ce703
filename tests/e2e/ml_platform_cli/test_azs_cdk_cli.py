"""``mlp azs`` then the real CDK CLI: ``cdk synth`` targets what ``mlp azs`` chose.

Observed: the CDK CLI of node_modules (aws-cdk 2.1148.1) merges ~/.cdk.json, cdk.context.json
and cdk.json and hands the result to the app; the app here is the repository's ``app.py``
entry point (its settings checks included) with the platform replaced by a probe stack that
records the environment and Trainium AZ the settings name. EC2 and STS are moto's.
Taken from the CLI's source (``Configuration.loadConfigFiles``, ``Context.all``): the order
of the files; this test checks that ``ml_platform.config.cdk_context`` gives the app the
same ``ml-platform`` object the CLI gives it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ml_platform.config import CONTEXT_KEY, cdk_context
from tests.e2e.ml_platform_cli.test_e2e_deploy import CDK_QUIET, cdk_cli  # noqa: F401 (fixture)
from tests.helpers.cli import REPO

pytestmark = pytest.mark.e2e

ACCOUNT = "210987654321"
PROBE_APP = """
import json, os, sys
sys.path.insert(0, {repo!r})
import aws_cdk as cdk
import app as entry  # the repository's app.py: settings checks, then build_platform

def probe(app, settings, **kwargs):
    stack = cdk.Stack(app, "Probe", env=cdk.Environment(
        account=settings.env.account, region=settings.env.region))
    cdk.CfnOutput(stack, "TrainiumAz", value=settings.network.trainium_az)
    with open(os.environ["PROBE_CONTEXT"], "w") as out:
        json.dump(app.node.try_get_context({key!r}), out)

entry.build_platform = probe
entry.main()
"""


def _synth(cdk: Path, project: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(CDK_QUIET)
    env.update(
        {
            "HOME": str(home),
            "PROBE_CONTEXT": str(project / "probe-context.json"),
            "PYTHONPATH": str(REPO),
            # No AWS: a closed local port, so any lookup fails at once.
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": str(home / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-credentials"),
        }
    )
    return subprocess.run(
        [str(cdk), "synth", "--quiet", "--no-notices", "--output", str(project / "cdk.out")],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_cdk_synth_targets_what_mlp_azs_chose(cdk_cli, aws_env, tmp_path, monkeypatch, mlp):  # noqa: F811
    from moto import mock_aws

    project = tmp_path / "project"
    project.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (project / "probe_app.py").write_text(PROBE_APP.format(repo=str(REPO), key=CONTEXT_KEY))
    config = json.loads((REPO / "cdk.json").read_text())
    config["app"] = f"{sys.executable} probe_app.py"
    (project / "cdk.json").write_text(json.dumps(config, indent=2))
    # An object an earlier `mlp azs` left in cdk.context.json (us-west-2d, cdk.json's
    # account), and a user default in ~/.cdk.json: the CLI merges both under cdk.json.
    (project / "cdk.context.json").write_text(
        json.dumps({CONTEXT_KEY: {"network": {"trainium_az": "us-west-2d"}}})
    )
    (home / ".cdk.json").write_text(
        json.dumps({"context": {CONTEXT_KEY: {"training": {"queue": "from-home"}}}})
    )

    monkeypatch.setenv("MOTO_ACCOUNT_ID", ACCOUNT)
    with mock_aws():  # moto: trn1.32xlarge in usw2-az1 (us-west-2b) and usw2-az4
        result = mlp(
            "--cdk-json", project / "cdk.json", "azs", "--admin-role-mine", "--az-id", "usw2-az1"
        )
    assert result.code == 0, result.err

    done = _synth(cdk_cli, project, home)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((project / "cdk.out" / "manifest.json").read_text())
    assert manifest["artifacts"]["Probe"]["environment"] == f"aws://{ACCOUNT}/us-west-2"
    template = json.loads((project / "cdk.out" / "Probe.template.json").read_text())
    assert template["Outputs"]["TrainiumAz"]["Value"] == "us-west-2b"
    # The object the CLI gave the app is the one mlp reads (~/.cdk.json's key included).
    given = json.loads((project / "probe-context.json").read_text())
    assert given == cdk_context(project / "cdk.json")[CONTEXT_KEY]
    assert given["training"] == {"queue": "from-home"}

    # A value in cdk.context.json that cdk.json overrides is refused, naming both files.
    (project / "cdk.context.json").write_text(
        json.dumps({CONTEXT_KEY: {"network": {"trainium_az": "us-west-2d"}}})
    )
    shutil.rmtree(project / "cdk.out")
    done = _synth(cdk_cli, project, home)
    assert done.returncode != 0
    assert (
        'cdk.context.json: ml-platform network.trainium_az = "us-west-2d" does not take '
        'effect: cdk.json\'s network.trainium_az = "us-west-2b", and the CDK CLI lets '
        "cdk.json win"
    ) in done.stderr
