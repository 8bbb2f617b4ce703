"""The training image: Dockerfile pins, build plan, pinned workload images."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

from ml_platform.training import image, images

DOCKERFILE = Path(image.__file__).with_name("Dockerfile").read_text()


def dockerfile_arg_defaults() -> dict[str, str]:
    joined = DOCKERFILE.replace("\\\n", " ")  # Docker joins continued lines first
    return {
        m.group(1): " ".join(m.group(2).strip('"').split())
        for m in re.finditer(r"^ARG (\w+)=(\"[^\"]*\"|\S+)", joined, re.MULTILINE)
    }


def test_dockerfile_defaults_are_the_pinned_values():
    assert dockerfile_arg_defaults() == image.build_args()


def test_dockerfile_starts_from_the_pinned_neuron_container():
    assert "FROM ${BASE_IMAGE}" in DOCKERFILE
    assert image.build_args()["BASE_IMAGE"] == (
        "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04"
    )
    assert re.fullmatch(r"[0-9a-f]{40}", images.NEURON_SAMPLES_COMMIT)
    assert "dp_bert_large_hf_pretrain_hdf5.py" in images.NEURON_SAMPLES_FILES
    assert all(re.fullmatch(r"[0-9a-f]{64}", d) for d in images.NEURON_SAMPLES_FILES.values())


def test_plan_builds_logs_in_and_pushes_the_settings_uri(settings):
    plan = image.image_plan(settings)
    uri = settings.training_image_uri
    assert plan.uri == uri
    assert plan.build[:2] == ["docker", "build"]
    assert plan.build[plan.build.index("--tag") + 1] == uri
    assert f"BASE_IMAGE={images.NEURON_TRAINING_BASE_IMAGE}" in plan.build
    assert plan.password == ["aws", "ecr", "get-login-password", "--region", "us-west-2"]
    assert plan.login[-1] == "123456789012.dkr.ecr.us-west-2.amazonaws.com"
    assert "--password-stdin" in plan.login
    assert plan.push == ["docker", "push", uri]


def test_dry_run_prints_commands_without_running_them(cdk_json, capsys, settings):
    assert image.main(["--cdk-json", str(cdk_json), "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("docker build ")
    assert out[1].startswith("aws ecr get-login-password --region us-west-2 | docker login ")
    assert out[2] == f"docker push {settings.training_image_uri}"
    assert out[3] == "docker logout 123456789012.dkr.ecr.us-west-2.amazonaws.com"


@pytest.mark.parametrize("failing", [None, "push", "login"])
def test_publish_logs_out_of_ecr_after_the_push_even_when_it_fails(settings, monkeypatch,
                                                                    failing):
    """Issue 22 point 5: the ECR token must not stay in ~/.docker/config.json."""
    import subprocess

    plan = image.image_plan(settings)
    calls: list[list[str]] = []

    def run(argv, **kwargs):
        calls.append(argv)
        if failing and argv[:2] == ["docker", failing]:
            raise subprocess.CalledProcessError(1, argv)
        return subprocess.CompletedProcess(argv, 0, stdout="token", stderr="")

    monkeypatch.setattr(image.subprocess, "run", run)
    if failing:
        with pytest.raises(subprocess.CalledProcessError):
            image.publish(plan)
    else:
        image.publish(plan)
    assert calls[-1] == ["docker", "logout", "123456789012.dkr.ecr.us-west-2.amazonaws.com"]
    assert calls.count(plan.logout) == 1


@pytest.mark.parametrize(
    "ref",
    [images.NEURON_TRAINING_BASE_IMAGE, images.AWS_CLI_IMAGE, images.BUSYBOX_IMAGE,
     images.TENSORBOARD_IMAGE],
)  # fmt: skip
def test_images_are_pinned_to_versions(ref):
    tag = ref.rsplit(":", 1)[-1]
    assert "/" not in tag and tag != "latest" and re.search(r"\d", tag)


def _run_instructions() -> list[str]:
    """The Dockerfile's RUN instructions in build order, continued lines joined."""
    joined = DOCKERFILE.replace("\\\n", " ")
    return [m.group(1) for m in re.finditer(r"^RUN (.+)$", joined, re.MULTILINE)]


def test_build_check_imports_the_neuron_stack_after_the_requirement_downgrades():
    runs = _run_instructions()
    install = next(
        i for i, r in enumerate(runs) if "pip install" in r and "-r requirements.txt" in r
    )
    check = next(i for i, r in enumerate(runs) if r.startswith("python3 -c "))
    assert check > install
    (code,) = shlex.split(runs[check])[2:]
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module)])
    }
    assert {"torch_neuronx", "torch_xla", "h5py", "transformers", "torch"} <= imported


def test_image_adds_no_rendezvous_client():
    # c10d is part of torch; python-etcd (and its urllib3 constraints) left with etcd.
    assert "etcd" not in DOCKERFILE.lower()
    assert not any("ETCD" in key for key in image.build_args())
