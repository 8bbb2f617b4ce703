"""The training image: Dockerfile pins, build plan, pinned workload images."""

from __future__ import annotations

import ast
import json
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


BASE_DIGEST = "sha256:" + "ab" * 32


@pytest.fixture
def pinned(settings):
    """The default settings with the base image's digest, as `mlp images resolve` records it."""
    from ml_platform.config import IMAGE_DIGESTS_KEY, Settings

    return Settings.from_context(
        {},
        known_azs={
            IMAGE_DIGESTS_KEY: {images.NEURON_TRAINING_BASE_IMAGE: BASE_DIGEST},
            settings.availability_zones_context_key: list(settings.network.availability_zones),
        },
    )


def test_dockerfile_starts_from_the_base_image_pinned_by_digest(pinned, settings):
    # No default: the base comes only as make image passes it, by digest.
    assert re.search(r"^ARG BASE_IMAGE$", DOCKERFILE, re.MULTILINE)
    assert "FROM ${BASE_IMAGE}" in DOCKERFILE
    assert images.NEURON_TRAINING_BASE_IMAGE == (
        "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.29.1-ubuntu24.04"
    )
    assert image.build_args(pinned)["BASE_IMAGE"] == (
        f"{images.NEURON_TRAINING_BASE_IMAGE}@{BASE_DIGEST}"
    )
    with pytest.raises(ValueError, match="has no digest: run `mlp images resolve`"):
        image.build_args(settings)
    assert re.fullmatch(r"[0-9a-f]{40}", images.NEURON_SAMPLES_COMMIT)
    assert "dp_bert_large_hf_pretrain_hdf5.py" in images.NEURON_SAMPLES_FILES
    assert all(re.fullmatch(r"[0-9a-f]{64}", d) for d in images.NEURON_SAMPLES_FILES.values())


def test_plan_builds_logs_in_and_pushes_the_settings_uri(pinned):
    settings = pinned
    plan = image.image_plan(settings)
    uri = settings.training_image_uri
    assert plan.uri == uri
    assert plan.build[:2] == ["docker", "build"]
    assert plan.build[plan.build.index("--tag") + 1] == uri
    assert f"BASE_IMAGE={images.NEURON_TRAINING_BASE_IMAGE}@{BASE_DIGEST}" in plan.build
    assert plan.password == ["aws", "ecr", "get-login-password", "--region", "us-west-2"]
    assert plan.login[-1] == "123456789012.dkr.ecr.us-west-2.amazonaws.com"
    assert "--password-stdin" in plan.login
    assert plan.push == ["docker", "push", uri]


def test_make_image_refuses_a_base_without_digest(cdk_json, capsys):
    assert image.main(["--cdk-json", str(cdk_json), "--dry-run"]) == 1
    assert "has no digest: run `mlp images resolve`" in capsys.readouterr().err


def test_dry_run_prints_commands_without_running_them(cdk_json, capsys, settings):
    from ml_platform.config import IMAGE_DIGESTS_KEY

    cdk_json.with_name("cdk.context.json").write_text(
        json.dumps({IMAGE_DIGESTS_KEY: {images.NEURON_TRAINING_BASE_IMAGE: BASE_DIGEST}})
    )
    assert image.main(["--cdk-json", str(cdk_json), "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("docker build ")
    assert out[1].startswith("aws ecr get-login-password --region us-west-2 | docker login ")
    assert out[2] == f"docker push {settings.training_image_uri}"
    assert out[3] == "docker logout 123456789012.dkr.ecr.us-west-2.amazonaws.com"


@pytest.mark.parametrize("failing", [None, "push", "login"])
def test_publish_logs_out_of_ecr_after_the_push_even_when_it_fails(pinned, monkeypatch, failing):
    """Issue 22 point 5: the ECR token must not stay in ~/.docker/config.json."""
    import subprocess

    plan = image.image_plan(pinned)
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


LOCK = Path(image.__file__).with_name("sample-requirements.lock")


def lock_entries(path: Path = LOCK) -> dict[str, tuple[str, list[str]]]:
    """A hash lock's entries: name -> (pinned version, its sha256 hashes); comments skipped."""
    entries: dict[str, tuple[str, list[str]]] = {}
    current = ""
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            continue
        match = re.match(r"([a-z0-9][a-z0-9._-]*)==(\S+)", line)
        if match:
            current = match[1]
            entries[current] = (match[2], [])
        for digest in re.findall(r"--hash=sha256:([0-9a-f]{64})", line):
            entries[current][1].append(digest)
    return entries


def test_sample_requirements_are_exactly_the_samples_file():
    """The table is the sample's own requirements.txt (its text, whose sha256 the build checks
    when it fetches the file): the lock must not install another version than the sample's,
    or the sample's own unhashed install changes it again (requests was 2.32.2 here, 2.31.0
    in the file)."""
    import hashlib

    text = images.SAMPLE_REQUIREMENTS_TXT
    assert (
        hashlib.sha256(text.encode()).hexdigest() == images.NEURON_SAMPLES_FILES["requirements.txt"]
    )
    parsed = {}
    for line in text.splitlines():
        name, _, version = line.partition("==")
        parsed[name] = version or None
    assert parsed == images.SAMPLE_REQUIREMENTS
    assert parsed["requests"] == "2.31.0"


def test_sample_lock_pins_and_hashes_every_sample_requirement():
    """Each entry of the sample's requirements.txt has one exact pin (the sample's own where it
    has one; PEP 440 `==2.14` is 2.14.0) and sha256 hashes; nothing else is in the lock."""
    entries = lock_entries()
    assert set(entries) == set(images.SAMPLE_REQUIREMENTS)
    for name, pinned in images.SAMPLE_REQUIREMENTS.items():
        version, hashes = entries[name]
        if pinned is not None:
            assert version.removesuffix(".0") == pinned.removesuffix(".0"), name
        assert re.fullmatch(r"[0-9]+(\.[0-9]+)+", version), (name, version)
        assert hashes, name
    unpinned = sorted(n for n, v in images.SAMPLE_REQUIREMENTS.items() if v is None)
    assert unpinned == ["accelerate", "evaluate", "graphviz", "h5py", "pillow", "pytest"]
    # The wheels pip picks on the base image (CPython 3.12, glibc x86_64) are among the
    # hashes; checked with `pip download --platform manylinux_2_28_x86_64 --python-version 3.12`.
    wheels = {  # name -> sha256 of the file pip downloads for that platform
        "transformers": "ea0ff72def71e9f4812d9414d4803b22681b1617aa6f511bd51cfff2b44a6fca",
        "pillow": "b2dbea1012ccb784a65349f57bbc93730b96e85b42e9bf7b01ef40443db720b4",
        "h5py": "d6f13f9b5ce549448c01e4dfe08ea8d1772e6078799af2c1c8d09e941230a90d",
        "sentencepiece": "f295105c6bdbb05bd5e1b0cafbd78ff95036f5d3641e7949455a3f4e5e7c3109",
    }
    for name, digest in wheels.items():
        assert digest in entries[name][1]


def test_dockerfile_installs_the_lock_hash_checked_before_the_sample_file():
    runs = _run_instructions()
    assert re.search(
        r"^COPY sample-requirements\.lock /tmp/sample-requirements\.lock$", DOCKERFILE, re.MULTILINE
    )
    (install,) = [r for r in runs if "sample-requirements.lock" in r]
    first, second = (shlex.split(step) for step in install.split("&&"))
    assert first[:4] == ["python3", "-m", "pip", "install"]
    assert {"--require-hashes", "--no-deps"} <= set(first)
    assert first[first.index("-r") + 1] == "/tmp/sample-requirements.lock"
    # Then the sample's file: with every entry installed at its locked version, pip only adds
    # what they need and the base image lacks.
    assert second[:4] == ["python3", "-m", "pip", "install"]
    assert second[second.index("-r") + 1] == "requirements.txt"
    # The sample's own file is the one its sha256 pins (fetched before this step).
    assert images.NEURON_SAMPLES_FILES["requirements.txt"] == (
        "ce8f6601e59aaac2346200715ba95ba47eb50e4b33d32956ad8cdd32e64094eb"
    )
