"""End to end: the real CDK CLI deploys the app into a local moto server, then ``mlp`` runs.

Nothing is mocked inside this process: ``moto_server`` runs as a subprocess on a free
localhost port, the CDK CLI from ``node_modules`` bootstraps the environment and deploys
``MlPlatform-Network``, ``MlPlatform-Storage`` and ``MlPlatform-Inference`` over HTTP
(``AWS_ENDPOINT_URL=http://localhost:PORT``: S3 virtual-host names resolve under
``localhost``, not under ``127.0.0.1``), and ``mlp`` runs as a subprocess against them.

What moto 5.2.5 cannot do, and what that means here:

* It cannot create EKS clusters, and it does not run Lambda-backed custom resources
  (the kubectl provider behind ``add_cdk8s_chart``/``add_helm_chart``, ``BucketDeployment``'s
  upload, the endpoint-scaling guard). So the training cluster and Triton on EKS are switched
  off (``features.training_cluster``/``triton_on_eks`` = false), so is
  ``inference.instance_type_changes`` (tests/unit/constructs/test_endpoint_scaling.py runs its
  handler against moto's Application Auto Scaling instead), and no ``inference.upload_dir``
  is set (``mlp models upload`` does the upload instead).
* It has no CloudFormation support for ``AWS::FSx::FileSystem``: the resource is skipped
  silently, the Storage stack still completes, and its ``FileSystemId`` output is absent.
* Executing a change set does not refresh a stack's outputs or exports, so the Storage
  stack could not import the Network stack's exports: deploy with ``--method=direct``
  (CreateStack/UpdateStack).
* ``AWS::SageMaker::Endpoint`` ignores the ``EndpointName`` property (the endpoint is named
  after the stack and logical id), so ``mlp status`` without ``--endpoint`` reports the
  configured name as not found, listing moto's name; the test then passes that name.
* Its InvokeEndpoint returns queued canned bodies: the test queues a Triton JSON response.
* Its CloudFormation creates no ``AWS::CloudWatch::Alarm`` and deletes resources whatever their
  ``DeletionPolicy``; a create that meets an existing log group fails with a response the CDK
  CLI cannot parse (AWS says "already exists"). The teardown-and-redeploy check puts the
  retained log group back by hand and asserts only that the deploy fails while it exists.
* Its ``AWS::KMS::Key`` drops a key that has ``Tags`` (the flow-log key has the project tag):
  the server runs as ``tests/helpers/moto_server_patched.py``, which fixes only that.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import boto3
import numpy as np
import pytest

from tests.helpers.cli import REGION, REPO, triton_json_response
from tests.helpers.doc_blocks import doc_block

pytestmark = pytest.mark.e2e

CDK = REPO / "node_modules" / ".bin" / "cdk"
PREFIX = "MlPlatform"
STACKS = [f"{PREFIX}-Network", f"{PREFIX}-Storage", f"{PREFIX}-Inference"]
# The CDK CLI must not reach the internet (notices, telemetry, version check).
CDK_QUIET = {
    "CDK_DISABLE_CLI_TELEMETRY": "true",
    "CDK_DISABLE_VERSION_CHECK": "true",
    "CI": "true",
}


@pytest.fixture(scope="session")
def cdk_cli() -> Path:
    """The CDK CLI of node_modules; skips (before the server starts) when it cannot run."""
    if shutil.which("node") is None:
        pytest.skip(
            "Node.js is not installed: the end-to-end deploy needs the CDK CLI "
            "(run `make install`, or deselect with -m 'not e2e')"
        )
    if not (REPO / "node_modules" / "aws-cdk" / "package.json").is_file() or not CDK.exists():
        pytest.skip(
            "node_modules/aws-cdk is missing: run `npm ci` (or `make install`), "
            "or deselect with -m 'not e2e'"
        )
    return CDK


def _mlp() -> list[str]:
    script = Path(sys.executable).with_name("mlp")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ml_platform_cli"]


def _run(argv: list, env: dict[str, str], cwd: Path, timeout: float = 120):
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, argv))} exited {done.returncode}\n"
            f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
        )
    return done


def test_deploy_upload_status_invoke(cdk_cli, moto_server, archives, tmp_path):
    started = time.monotonic()
    urllib.request.urlopen(
        urllib.request.Request(f"{moto_server.url}/moto-api/reset", method="POST"), timeout=10
    ).close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(CDK_QUIET)
    env.update(
        {
            "AWS_ENDPOINT_URL": moto_server.url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
            "AWS_EC2_METADATA_DISABLED": "true",
        }
    )

    # The runbook's "Local moto deploy" block, run as it is written (docs/runbook.md), in a
    # folder laid out like a clone: cdk.json, app.py, .venv, node_modules, package.json and
    # dist/models (the archives) where the block expects them. Its settings are the ones the
    # runbook shows: a block that stops working fails here.
    block = doc_block("local-moto-deploy")
    project = tmp_path / "project"
    project.mkdir()
    (project / "cdk.json").write_text((REPO / "cdk.json").read_text())
    for name in ("app.py", "package.json", "node_modules", "ml_platform"):
        (project / name).symlink_to(REPO / name)
    (project / ".venv").symlink_to(Path(sys.prefix))
    (project / "dist").mkdir()
    (project / "dist" / "models").symlink_to(archives.folder)
    shown = _run(["bash", "-euo", "pipefail", "-c", block.text], env, project, timeout=600)
    deployed = time.monotonic()

    session = boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
    )

    def client(service):
        return session.client(service, endpoint_url=moto_server.url)

    cloudformation = client("cloudformation")
    for name in STACKS:
        stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
        assert stack["StackStatus"] == "CREATE_COMPLETE", name
    outputs = {
        name: {
            o["OutputKey"]: o["OutputValue"]
            for o in cloudformation.describe_stacks(StackName=name)["Stacks"][0]["Outputs"]
        }
        for name in STACKS
    }
    bucket = outputs[f"{PREFIX}-Storage"]["ModelBucketName"]
    assert outputs[f"{PREFIX}-Storage"]["ModelPrefix"] == "models/"
    assert outputs[f"{PREFIX}-Inference"]["TritonEnsemblesName"] == "triton-ensembles"
    # The default security group is left as EC2 makes it (the block switches the
    # restriction off): no custom resource for moto to wait on.
    assert "restrict_default_security_group" in block.text

    sagemaker = client("sagemaker")
    (model,) = sagemaker.list_models()["Models"]
    container = sagemaker.describe_model(ModelName=model["ModelName"])["PrimaryContainer"]
    assert container["Mode"] == "MultiModel"
    assert container["ModelDataUrl"] == f"s3://{bucket}/models/"
    assert container["Image"].endswith("/sagemaker-tritonserver:25.09-py3")
    (endpoint,) = sagemaker.list_endpoints()["Endpoints"]
    name = endpoint["EndpointName"]
    assert endpoint["EndpointStatus"] == "InService"

    mlp = [*_mlp(), "--cdk-json", project / "cdk.json"]
    # The block's last command: `.venv/bin/mlp models upload dist/models`.
    assert f"s3://{bucket}/models/{archives.text.name}  (uploaded)" in shown.stdout
    listing = client("s3").list_objects_v2(Bucket=bucket, Prefix="models/")
    assert sorted(o["Key"] for o in listing["Contents"]) == sorted(
        [f"models/{archives.image.name}", f"models/{archives.text.name}"]
    )

    # moto names the endpoint itself (see the module docstring): the error says so.
    missing = subprocess.run(
        [*map(str, mlp), "status"], cwd=project, env=env, capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        f"mlp: error: endpoint 'triton-ensembles' not found in {REGION} (endpoints there: {name})"
    )
    report = json.loads(_run([*mlp, "status", "--endpoint", name, "--json"], env, project).stdout)
    (status,) = report["endpoints"]
    assert status["status"] == "InService"
    assert status["variants"] == [
        {
            "name": "AllTraffic",
            "instance_type": "ml.g4dn.4xlarge",
            "current_instances": 1,
            "desired_instances": 1,
        }
    ]

    vector = np.full((1, 384), 1 / np.sqrt(384), dtype=np.float32)
    body = triton_json_response("finaloutput", vector)
    queued = json.dumps(
        {
            "region": REGION,
            "results": [
                {
                    "Body": body,
                    "ContentType": f"application/vnd.sagemaker-triton.binary+json;json-header-size={len(body)}",
                    "InvokedProductionVariant": "AllTraffic",
                    "CustomAttributes": "",
                }
            ],
        }
    ).encode()
    urllib.request.urlopen(
        urllib.request.Request(
            f"{moto_server.url}/moto-api/static/sagemaker/endpoint-results",
            data=queued,
            headers={"Content-Type": "application/json"},
            method="POST",
        ),
        timeout=10,
    ).close()
    # The ONNX text archive was uploaded (the endpoint's default names the T4 plan's).
    text_model = archives.text.name.split("-v")[0]
    invoked = json.loads(
        _run(
            [
                *mlp,
                "invoke",
                "--endpoint",
                name,
                "--model",
                text_model,
                "--text",
                "hello",
                "--json",
            ],
            env,
            project,
        ).stdout
    )
    assert invoked["target_model"] == archives.text.name  # the newest model_trt_python
    assert invoked["embeddings"][0]["dimension"] == 384
    assert invoked["embeddings"][0]["norm"] == pytest.approx(1.0, abs=1e-5)

    _check_alarm_topic_and_redeploy(cdk_cli, client, env, project, outputs[f"{PREFIX}-Inference"])

    total = time.monotonic() - started
    # Reported, not asserted: wall time on a shared 2-core machine says little about the code.
    print(f"e2e: bootstrap+deploy {deployed - started:.1f} s, total {total:.1f} s")


def _check_alarm_topic_and_redeploy(cdk_cli, client, env, project, outputs) -> None:
    """The alarms' topic deploys (encrypted); then the Inference stack's
    teardown and redeploy as docs/serving-sagemaker.md ("Endpoint logs") and the runbook's
    left-behind table describe them, with the default storage.removal_policy (retain): the
    endpoint's log group outlives `cdk destroy`; once deleted with the documented command, a
    new deploy creates it again."""
    inference = f"{PREFIX}-Inference"
    topic = outputs["AlarmTopicArn"]
    attributes = client("sns").get_topic_attributes(TopicArn=topic)["Attributes"]
    assert attributes["KmsMasterKeyId"].startswith("arn:aws:kms:")
    # moto 5.2.5's CloudFormation creates no AWS::CloudWatch::Alarm (describe_alarms is empty
    # after the deploy): the alarms' actions are checked on the template
    # (tests/unit/constructs/test_alarm_topic.py).

    group = "/aws/sagemaker/Endpoints/triton-ensembles"
    logs = client("logs")

    def groups() -> list[str]:
        found = logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]
        return [g["logGroupName"] for g in found]

    assert groups() == [group]
    # The cloud assembly the block's deploy synthesized (project/cdk.out, its settings): the
    # commands below reuse it rather than run the app three more times.
    assembly = ["--app", project / "cdk.out", "--no-notices"]
    destroy = [cdk_cli, "destroy", inference, "--force", *assembly]
    deploy = [cdk_cli, "deploy", inference, "--require-approval", "never", "--method=direct"]
    deploy += [*assembly, "--exclusively"]
    _run(destroy, env, project)
    # AWS keeps the group (DeletionPolicy RetainExceptOnCreate, tests/app/test_stateful_ids.py);
    # moto deletes it whatever the policy, so it is put back as AWS leaves it.
    logs.create_log_group(logGroupName=group)
    refused = subprocess.run(
        [str(a) for a in deploy], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )
    # The same deploy fails while the group exists and succeeds once it is deleted. (AWS says
    # "already exists"; moto's server answers CreateStack with a body the CDK CLI cannot
    # parse, so only the failure itself is asserted.)
    assert refused.returncode != 0, refused.stdout[-2000:]
    assert "failed to deploy" in refused.stderr, refused.stderr[-3000:]
    logs.delete_log_group(logGroupName=group)  # the documented `aws logs delete-log-group`
    cloudformation = client("cloudformation")
    left = [
        s for s in cloudformation.list_stacks()["StackSummaries"] if s["StackName"] == inference
    ]
    if any(s["StackStatus"] != "DELETE_COMPLETE" for s in left):
        _run(destroy, env, project)
    _run(deploy, env, project)
    assert groups() == [group]
    stack = client("cloudformation").describe_stacks(StackName=inference)["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
