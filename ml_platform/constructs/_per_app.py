"""Things a construct makes once per app and key, whichever stack or instance asks first (the
control-plane rules of a security-group pair, a cluster's NVIDIA device plugin): a dictionary
look-up instead of a walk of the whole construct tree. Weak on the app, so apps are not kept."""

from __future__ import annotations

import weakref
from typing import Any

from aws_cdk import Token
from constructs import IConstruct

_MADE: weakref.WeakKeyDictionary[IConstruct, dict[str, dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)


def registry(scope: IConstruct, kind: str) -> dict[str, Any]:
    """The ``kind`` things made so far in ``scope``'s app, by key."""
    return _MADE.setdefault(scope.node.root, {}).setdefault(kind, {})


def key_of(construct: IConstruct, name: str) -> str:
    """A key for ``construct``: its ``name`` (a group id, a cluster name) when that is known at
    synth, else its construct path (two imports of one resource by the same token share it)."""
    return construct.node.path if Token.is_unresolved(name) else name
