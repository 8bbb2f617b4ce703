"""How a construct checks its props: one ``ValueError`` naming the construct's path and every
problem, so each constructor calls this instead of writing the raise again.

A construct's props class inherits the fields it shares with a settings section from a base in
:mod:`ml_platform.props` (the section inherits the same base): :func:`check_props` checks those
fields as the settings parser does (each field's constraints, then the base's cross-field rules)
and words the problems the same way, with the props' names bare."""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from typing import Any

from constructs import IConstruct

from ml_platform._settings_parse import validated
from ml_platform.props import shared_fields


def raise_problems(scope: IConstruct, problems: Sequence[str]) -> None:
    """Raise one ``ValueError`` with every problem of ``scope``'s props (none: return)."""
    if problems:
        raise ValueError(f"{scope.node.path}: " + "; ".join(problems))


#: The markers of aws-cdk's encoded tokens (aws-cdk-lib 2.275 core/lib/private/encoding.js:
#: BEGIN_STRING_TOKEN_MARKER, BEGIN_LIST_TOKEN_MARKER); a number token is a double near
#: -1.89e289 (DOUBLE_TOKEN_MARKER_BITS). Checked here in Python: ``Token.is_unresolved`` is a
#: call into Node per value, at every synth.
_TOKEN_MARKERS = ("${Token[", "#{Token[")
_NUMBER_TOKEN_MAGNITUDE = 1e288


def unresolved(value: Any) -> bool:
    """Whether ``value`` is, or holds, an unresolved CDK token."""
    if isinstance(value, str):
        return any(marker in value for marker in _TOKEN_MARKERS)
    if isinstance(value, float):
        return abs(value) >= _NUMBER_TOKEN_MAGNITUDE
    if isinstance(value, Mapping):
        return any(unresolved(v) for v in value.values())
    if isinstance(value, Sequence):
        return any(unresolved(v) for v in value)
    return False


def _plain(value: Any) -> Any:
    """``value`` as JSON data: sequences as lists, mappings as dicts."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(v) for v in value]
    return value


def shared_problems(props: Any, base: type) -> list[str]:
    """The problems of the fields ``props`` inherits from ``base`` (a settings-section base of
    :mod:`ml_platform.props`), worded as the settings word them: ``name = value: allowed``.

    A field whose value is an unresolved token is known at deploy time only: it is not checked,
    and then neither are the cross-field rules (they could read it); every other field still
    meets its own constraints."""
    fields = shared_fields(props, base)
    problems: list[str] = []
    if not any(unresolved(v) for v in fields.values()):
        values = {k: _plain(v) for k, v in fields.items()}
        validated(base, values, "", problems, label=type(props).__name__, removed={})
        return problems
    hints = typing.get_type_hints(base, include_extras=True)
    for name, value in fields.items():
        if not unresolved(value):
            validated(hints[name], _plain(value), name, problems, label=name, removed={})
    return problems


def check_props(scope: IConstruct, props: Any, base: type, *more: str) -> None:
    """Raise one ``ValueError`` with the problems of ``props``'s fields from ``base``
    (:func:`shared_problems`) and ``more`` (the construct's own rules), if any."""
    raise_problems(scope, [*shared_problems(props, base), *more])
