"""Typed access to the CloudFormation resources aws-cdk's L2 constructs hold.

``node.default_child`` and ``node.find_child`` return ``IConstruct``; these helpers check the
class (so a change in aws-cdk's tree fails at synth, not with an attribute error later) and
return it typed.
"""

from __future__ import annotations

from typing import TypeVar

from constructs import IConstruct

_Resource = TypeVar("_Resource", bound=IConstruct)


def default_child(construct: IConstruct, kind: type[_Resource]) -> _Resource:
    """``construct``'s default child, which must be a ``kind``."""
    return _checked(construct, construct.node.default_child, kind, "default child")


def find_child(construct: IConstruct, child_id: str, kind: type[_Resource]) -> _Resource:
    """``construct``'s child ``child_id``, which must be a ``kind``."""
    return _checked(construct, construct.node.find_child(child_id), kind, f"child {child_id!r}")


def _checked(
    construct: IConstruct, child: IConstruct | None, kind: type[_Resource], what: str
) -> _Resource:
    if not isinstance(child, kind):
        raise TypeError(
            f"{construct.node.path}: expected a {kind.__name__} as {what}, found {child!r}"
        )
    return child
