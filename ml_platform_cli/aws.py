"""What every command shares: settings, the boto3 session, stack outputs and user errors.

Nothing heavy is imported at module level: ``mlp --help`` must stay fast.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import boto3

    from ml_platform.config import Settings


def doc_summary(doc: str | None) -> str:
    """First paragraph of a module docstring, as plain text for ``--help``."""
    return (doc or "").split("\n\n")[0].replace("``", "")


class Subcommands(Protocol):
    """What a command's ``add_parser`` uses of ``ArgumentParser.add_subparsers()``: its
    ``add_parser``. (``argparse._SubParsersAction`` is generic only in typeshed, not at run
    time, so the API reference could not evaluate an annotation with it.)"""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...


class CliError(Exception):
    """A problem the user can fix. ``main`` prints it without a traceback and exits 1."""


class StackNotFound(CliError):
    """The CloudFormation stack does not exist (in this account and region)."""


class OutputMissing(CliError):
    """The stack exists but lacks an output the command needs."""


class EndpointNotFound(CliError):
    """The SageMaker endpoint does not exist (in this account and region)."""


def error_code(error: BaseException | None) -> str:
    """The AWS error code of a botocore ``ClientError`` ('' for anything else)."""
    code: str = getattr(error, "response", {}).get("Error", {}).get("Code", "")
    return code


def error_message(error: Exception) -> str:
    return getattr(error, "response", {}).get("Error", {}).get("Message", "") or str(error)


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line (an HTML error page without its tags), at most ``limit`` long."""
    if re.match(r"\s*<(!doctype|html)", text, re.IGNORECASE):
        text = re.sub(r"<[^>]*>", " ", text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Context:
    """Global options, resolved lazily: settings from ``cdk.json``, one boto3 session.

    Region and stack prefix come from the command line when given, otherwise from the
    settings (``env.region``, ``env.stack_prefix``): where ``cdk deploy`` put the stacks.
    """

    cdk_json: Path = Path("cdk.json")
    cdk_json_given: bool = False
    profile: str | None = None
    region_override: str | None = None
    stack_prefix_override: str | None = None
    _settings: Settings | None = field(default=None, repr=False)
    _session: boto3.Session | None = field(default=None, repr=False)
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Context:
        return cls(
            cdk_json=Path(args.cdk_json) if args.cdk_json else Path("cdk.json"),
            cdk_json_given=args.cdk_json is not None,
            profile=args.profile,
            region_override=args.region,
            stack_prefix_override=args.stack_prefix,
        )

    @property
    def settings(self) -> Settings:
        """Settings as ``cdk synth`` sees them; defaults when ``./cdk.json`` is absent."""
        if self._settings is None:
            from ml_platform.config import Settings, SettingsError, settings_from_cdk_json

            self.check_cdk_json()
            if not self.cdk_json.is_file():
                self._settings = Settings()
            else:
                try:
                    # The AZ context is synthesis's concern (no AWS lookup at synth); no
                    # command here needs it, and `mlp azs` is what writes it.
                    self._settings = settings_from_cdk_json(
                        str(self.cdk_json), check_az_context=False
                    )
                except SettingsError as error:
                    raise CliError(f"{self.cdk_json}: {error}") from None
        return self._settings

    def check_cdk_json(self) -> None:
        """A ``--cdk-json`` given must name a file."""
        if not self.cdk_json_given or self.cdk_json.is_file():
            return
        if self.cdk_json.is_dir():
            hint = self.cdk_json / "cdk.json"
            raise CliError(
                f"--cdk-json {self.cdk_json}: is a folder; expected the project's "
                f"cdk.json file" + (f" ({hint})" if hint.is_file() else "")
            )
        raise CliError(f"--cdk-json {self.cdk_json}: no such file")

    @property
    def region(self) -> str:
        if self.region_override is not None:
            from ml_platform.regions import region_problem

            problem = region_problem("--region", self.region_override)
            if problem:
                raise CliError(problem.replace("--region = ", "--region ", 1))
            return self.region_override
        return self.settings.env.region

    @property
    def stack_prefix(self) -> str:
        if self.stack_prefix_override is not None:
            from ml_platform.limits import STACK_PREFIX, shown

            if not STACK_PREFIX.matches(self.stack_prefix_override):
                raise CliError(
                    f"--stack-prefix {shown(self.stack_prefix_override)}: expected "
                    f"{STACK_PREFIX.expected} (as env.stack_prefix)"
                )
            return self.stack_prefix_override
        return self.settings.env.stack_prefix

    def stack_name(self, short: str) -> str:
        """``<prefix>-<short>``, e.g. ``MlPlatform-Storage``."""
        return f"{self.stack_prefix}-{short}"

    def session(self) -> boto3.Session:
        if self._session is None:
            import boto3
            from botocore.exceptions import ProfileNotFound

            try:
                self._session = boto3.Session(profile_name=self.profile)
            except ProfileNotFound:
                raise CliError(
                    f"--profile {self.profile}: no such profile in the AWS config"
                ) from None
        return self._session

    def client(self, service: str, region: str | None = None, **kwargs: Any) -> Any:
        """A cached boto3 client in ``region`` (default: :attr:`region`)."""
        region = region or self.region
        key = f"{service}@{region}"
        if key not in self._clients:
            self._clients[key] = self.session().client(service, region_name=region, **kwargs)
        return self._clients[key]


def stack_outputs(ctx: Context, short: str) -> dict[str, str]:
    """Outputs of the deployed stack ``<prefix>-<short>``.

    Raises:
        StackNotFound: No such stack, or it never finished creating.
    """
    name = ctx.stack_name(short)
    cloudformation = ctx.client("cloudformation")
    try:
        stacks = cloudformation.describe_stacks(StackName=name)["Stacks"]
    except Exception as error:
        if error_code(error) == "ValidationError" and "does not exist" in error_message(error):
            stacks = []
        else:
            raise
    stack = stacks[0] if stacks else None
    if stack is None or stack["StackStatus"] in ("REVIEW_IN_PROGRESS", "DELETE_COMPLETE"):
        raise StackNotFound(
            f"stack {name!r} not found in {ctx.region}: deploy it (npx cdk deploy {name}) "
            "or pass the right --stack-prefix/--region/--profile"
        )
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def require_output(ctx: Context, short: str, outputs: dict[str, str], key: str) -> str:
    """``outputs[key]``, or an :class:`OutputMissing` naming the stack and what it has."""
    if key not in outputs:
        have = ", ".join(sorted(outputs)) or "none"
        raise OutputMissing(
            f"stack {ctx.stack_name(short)!r} has no output {key!r} (outputs: {have}); "
            "redeploy it with this version of the app"
        )
    return outputs[key]


def explain_aws_error(error: BaseException) -> str | None:
    """One line for the botocore errors a user meets; ``None`` for anything else."""
    try:
        from botocore import exceptions as bex
    except ImportError:  # a core install: the error cannot be a botocore one
        return None

    if isinstance(error, bex.NoCredentialsError):
        return (
            "no AWS credentials found: set AWS_PROFILE or pass --profile, run "
            "`aws configure` / `aws sso login`, or export AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY"
        )
    if isinstance(error, bex.PartialCredentialsError):
        return (
            f"incomplete AWS credentials ({error}): set both the access key id and the secret key"
        )
    if isinstance(error, bex.ProfileNotFound):
        return f"AWS profile not found: {error}"
    if isinstance(error, bex.NoRegionError):
        return "no AWS region: pass --region or set env.region in cdk.json"
    if isinstance(error, bex.TokenRetrievalError | bex.SSOError):
        return f"AWS SSO credentials could not be refreshed ({error}): run `aws sso login`"
    if isinstance(error, bex.EndpointConnectionError):
        return f"cannot reach AWS: {error}"
    if isinstance(error, bex.ClientError):
        code = error_code(error)
        operation = getattr(error, "operation_name", "")
        if code in ("ExpiredToken", "ExpiredTokenException", "RequestExpired"):
            return "AWS credentials have expired: refresh them (e.g. `aws sso login`)"
        if code in ("InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch"):
            return f"AWS rejected the credentials ({code}): check the profile or access keys"
        return f"AWS error in {operation} ({code}): {one_line(error_message(error))}"
    if isinstance(error, bex.BotoCoreError):
        return f"AWS SDK error: {one_line(str(error))}"
    return None
