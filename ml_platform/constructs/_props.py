"""How a construct checks its props: one ``ValueError`` naming the construct's path and every
problem, so each constructor calls this instead of writing the raise again.

A construct's props class inherits the fields it shares with a settings section from a base in
:mod:`ml_platform.props` (the section inherits the same base): :func:`check_props` checks those
fields as the settings parser does (each field's constraints, then the base's cross-field rules)
and words the problems the same way, with the props' names bare."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Token
from constructs import IConstruct

from ml_platform._settings_parse import validated


def raise_problems(scope: IConstruct, problems: Sequence[str]) -> None:
    """Raise one ``ValueError`` with every problem of ``scope``'s props (none: return)."""
    if problems:
        raise ValueError(f"{scope.node.path}: " + "; ".join(problems))


def _plain(value: Any) -> Any:
    """``value`` as JSON data: sequences as lists, mappings as dicts."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(v) for v in value]
    return value


def shared_problems(props: Any, base: type) -> list[str]:
    """The problems of the fields ``props`` inherits from ``base`` (a settings-section base of
    :mod:`ml_platform.props`), worded as the settings word them: ``name = value: allowed``. A
    field whose value is an unresolved token is not checked (it is known at deploy time only);
    the cross-field rules then read its default."""
    values = {
        f.name: _plain(getattr(props, f.name))
        for f in dataclasses.fields(base)
        if not Token.is_unresolved(_plain(getattr(props, f.name)))  # jsii takes no tuple
    }
    problems: list[str] = []
    validated(base, values, "", problems, label=type(props).__name__, removed={})
    return problems


def check_props(scope: IConstruct, props: Any, base: type, *more: str) -> None:
    """Raise one ``ValueError`` with the problems of ``props``'s fields from ``base``
    (:func:`shared_problems`) and ``more`` (the construct's own rules), if any."""
    raise_problems(scope, [*shared_problems(props, base), *more])
