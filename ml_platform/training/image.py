"""Build the training image, log in to ECR, tag it with the platform's URI and push it.

``make image`` runs ``bash ml_platform/training/image.sh``, which runs::

    python -m ml_platform.training.image [--cdk-json cdk.json] [--dry-run] [--no-push]

It needs Docker (with network access to public.ecr.aws and raw.githubusercontent.com) and
AWS credentials allowed to push to the ``MlPlatform-Storage`` ECR repository. The image URI
is ``Settings.training_image_uri`` (``training.image_repository`` and ``training.image_tag``
in cdk.json). The repository's tags are immutable: to publish a change, set a new
``training.image_tag``, rebuild, and re-generate the manifests (``make synth``).

``--dry-run`` prints the commands without running them (the ECR password is piped from
``aws ecr get-login-password`` to ``docker login --password-stdin`` and never printed).
``docker login`` stores the token in ``~/.docker/config.json`` unless a credential helper is
configured; ``docker logout`` of the registry runs after the push, whether it succeeded or not,
so the 12-hour token does not stay on disk.
"""

from __future__ import annotations

__all__ = [
    "ImagePlan",
    "image_plan",
    "main",
    "publish",
]

import argparse
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ml_platform.config import Settings, settings_from_cdk_json
from ml_platform.training import images

DOCKERFILE = Path(__file__).with_name("Dockerfile")
PLATFORM = "linux/amd64"  # Trainium instances are x86_64


@dataclass(frozen=True)
class ImagePlan:
    """The commands that publish the training image.

    Attributes:
        uri: Target image URI (``<registry>/<repository>:<tag>``).
        build: ``docker build`` argv.
        password: ``aws ecr get-login-password`` argv (its stdout feeds ``login``).
        login: ``docker login`` argv reading the password from stdin.
        push: ``docker push`` argv.
        logout: ``docker logout`` argv, run after the push (also when it fails).
    """

    uri: str
    build: list[str]
    password: list[str]
    login: list[str]
    push: list[str]
    logout: list[str]

    def describe(self, *, push: bool = True) -> str:
        """Shell-like text of the commands, for ``--dry-run``."""
        lines = [shlex.join(self.build)]
        if push:
            lines.append(f"{shlex.join(self.password)} | {shlex.join(self.login)}")
            lines.append(shlex.join(self.push))
            lines.append(shlex.join(self.logout))
        return "\n".join(lines)


def base_image(settings: Settings) -> str:
    """The base image as the build pulls it: by digest (``mlp images resolve`` records it),
    through the settings' registry mirror.

    Raises:
        ValueError: when no digest pins the base image.
    """
    policy = settings.image_policy
    if policy.digest(images.NEURON_TRAINING_BASE_IMAGE) is None:
        raise ValueError(
            f"the training image's base {images.NEURON_TRAINING_BASE_IMAGE} has no digest: run "
            "`mlp images resolve` (it records the digest the registry serves for the tag), or "
            "set it in images.digests; the build does not start from a tag that can be moved"
        )
    return policy.resolve(images.NEURON_TRAINING_BASE_IMAGE)


def build_args(settings: Settings | None = None) -> dict[str, str]:
    """Dockerfile build arguments: the pinned values of :mod:`ml_platform.training.images`,
    and, with ``settings``, ``BASE_IMAGE`` pinned by digest (:func:`base_image`)."""
    args = {} if settings is None else {"BASE_IMAGE": base_image(settings)}
    return {
        **args,
        "NEURON_SAMPLES_COMMIT": images.NEURON_SAMPLES_COMMIT,
        "NEURON_SAMPLES_DIR": images.NEURON_SAMPLES_DIR,
        "NEURON_SAMPLES_FILES": " ".join(
            f"{name}={digest}" for name, digest in images.NEURON_SAMPLES_FILES.items()
        ),
    }


def image_plan(settings: Settings) -> ImagePlan:
    """The build, login and push commands for ``settings.training_image_uri``."""
    uri = settings.training_image_uri
    registry = uri.split("/", 1)[0]
    build = ["docker", "build", "--platform", PLATFORM, "--pull", "--tag", uri]
    for key, value in build_args(settings).items():
        build += ["--build-arg", f"{key}={value}"]
    # The Dockerfile copies in only sample-requirements.lock and script_patch.py: its own
    # folder is the context.
    build += ["--file", str(DOCKERFILE), str(DOCKERFILE.parent)]
    return ImagePlan(
        uri=uri,
        build=build,
        password=["aws", "ecr", "get-login-password", "--region", settings.env.region],
        login=["docker", "login", "--username", "AWS", "--password-stdin", registry],
        push=["docker", "push", uri],
        # `docker login` keeps the credentials in the config file when no credential store is
        # set (https://docs.docker.com/reference/cli/docker/login/); logout removes them
        # (https://docs.docker.com/reference/cli/docker/logout/).
        logout=["docker", "logout", registry],
    )


def publish(plan: ImagePlan, *, push: bool = True) -> None:
    """Run the plan: build; then, with ``push``, log in to ECR and push."""
    subprocess.run(plan.build, check=True)
    if not push:
        return
    password = subprocess.run(plan.password, check=True, capture_output=True, text=True).stdout
    try:
        subprocess.run(plan.login, input=password, check=True, text=True)
        subprocess.run(plan.push, check=True)
    finally:  # also after a failed login or push: never leave the token in the config
        subprocess.run(plan.logout, check=False, capture_output=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ml_platform.training.image",
        description="Build the training image and push it to the platform's ECR repository.",
    )
    parser.add_argument("--cdk-json", default="cdk.json", help="cdk.json holding the settings")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    parser.add_argument("--no-push", action="store_true", help="build only")
    args = parser.parse_args(argv)
    try:
        plan = image_plan(settings_from_cdk_json(args.cdk_json))
    except ValueError as error:
        print(error, file=sys.stderr)
        return 1
    if args.dry_run:
        print(plan.describe(push=not args.no_push))
        return 0
    try:
        publish(plan, push=not args.no_push)
    except FileNotFoundError as error:  # docker or aws missing
        print(f"command not found: {error.filename}", file=sys.stderr)
        return 127
    except subprocess.CalledProcessError as error:
        print(f"failed ({error.returncode}): {shlex.join(error.cmd)}", file=sys.stderr)
        return error.returncode or 1
    print(plan.uri)
    return 0


if __name__ == "__main__":
    sys.exit(main())
