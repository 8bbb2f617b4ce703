"""``mlp completion bash|zsh|tcsh``: print the shell completion script of ``mlp``.

The script is generated from mlp's own argument parser by shtab, so it completes every
command, option and choice of this version, and needs no Python at completion time. Install
it once, e.g. for bash: ``mlp completion bash > ~/.local/share/bash-completion/completions/mlp``
(zsh: a file ``_mlp`` in a folder of ``$fpath``).
"""

from __future__ import annotations

import argparse

from ml_platform_cli.aws import Context, Subcommands, doc_summary

SHELLS = ("bash", "zsh", "tcsh")


def add_parser(
    sub: Subcommands, parents: list[argparse.ArgumentParser], *, root: argparse.ArgumentParser
) -> None:
    """``root`` is mlp's whole parser (what the script completes), handed in by
    :func:`ml_platform_cli.main.build_parser` so that this module does not import main back."""
    p = sub.add_parser(
        "completion",
        parents=parents,
        help="print the shell completion script (bash, zsh, tcsh)",
        description=doc_summary(__doc__),
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(run=run, root_parser=root)


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of ``parser`` (mlp's) for ``shell``."""
    import shtab

    text: str = shtab.complete(parser, shell=shell)
    return text


def run(ctx: Context, args: argparse.Namespace) -> int:
    print(script(args.root_parser, args.shell))
    return 0
