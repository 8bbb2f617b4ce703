"""How a construct reports its props' problems: one ``ValueError`` naming the construct's path
and every problem, so each constructor calls this instead of writing the raise again."""

from __future__ import annotations

from collections.abc import Sequence

from constructs import IConstruct


def raise_problems(scope: IConstruct, problems: Sequence[str]) -> None:
    """Raise one ``ValueError`` with every problem of ``scope``'s props (none: return)."""
    if problems:
        raise ValueError(f"{scope.node.path}: " + "; ".join(problems))
