"""How :mod:`ml_platform.config` reads JSON-like context with pydantic v2 and words its errors.

pydantic checks the types of the settings dataclasses (strict leaves: no ``"2"`` for 2, no 1 for
``true``; lists for tuples; no unknown keys; ``null`` drops to the default). Its errors become
the settings' own messages: the dotted key, the value and what is allowed. A value of the
wrong type is dropped and the rest validated again, so its field keeps its default and every
value check still runs over everything else, reporting in the same error.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ml_platform.limits import shown

if typing.TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import CoreSchema

INVALID: Any = object()
"""What :func:`validated` returns when the root itself has the wrong type."""
_MAX_PASSES = 50


class Section:
    """Base of the settings dataclasses: how pydantic reads them (a JSON object, no unknown
    keys, nulls dropped, no coercion of the leaves). Each field's docstring is its description:
    :func:`json_schema` reads them (the parser does not: finding them re-parses the module)."""

    __pydantic_config__: ClassVar[dict[str, object]] = {"strict": True, "extra": "forbid"}

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        from pydantic_core import core_schema

        schema = handler(source)
        _lax_containers(schema)
        names = frozenset(f.name for f in dataclasses.fields(source))
        return core_schema.no_info_before_validator_function(_drop_nulls(names), schema)


def _drop_nulls(names: frozenset[str]) -> Callable[[Any], Any]:
    """null means "not set": the field keeps its default. One rule for every source: jsii drops
    null members of cdk.json's context before the app sees them, so ``-c`` and the CLI's own
    reading of cdk.json must treat them the same way. (An unknown key is reported, null or not.)
    """

    def drop(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: v for k, v in value.items() if v is not None or k not in names}
        return value

    return drop


def _lax_containers(node: object) -> None:
    """Let lists stand for tuples and JSON objects for sections; the leaves stay strict."""
    if isinstance(node, dict):
        if node.get("type") in ("dataclass", "tuple"):
            node["strict"] = False
        for inner in node.values():
            _lax_containers(inner)
    elif isinstance(node, list):
        for inner in node:
            _lax_containers(inner)


@functools.cache
def adapter(tp: Any) -> Any:
    """pydantic's validator of ``tp`` (built once: building it takes milliseconds)."""
    from pydantic import TypeAdapter

    if dataclasses.is_dataclass(tp):  # configured by Section
        return TypeAdapter(tp)
    return TypeAdapter(tp, config={"strict": True})


def json_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of ``tp``, with each field's docstring as its description."""
    from pydantic import TypeAdapter

    config = Section.__pydantic_config__
    Section.__pydantic_config__ = {**config, "use_attribute_docstrings": True}
    try:
        schema: dict[str, Any] = TypeAdapter(tp).json_schema()
    finally:
        Section.__pydantic_config__ = config
    return schema


def validated(
    tp: Any, value: Any, prefix: str, problems: list[str], *, label: str, removed: Mapping[str, str]
) -> Any:
    """``value`` as ``tp`` (:data:`INVALID` if its root has the wrong type). Each type problem
    is recorded under its dotted key (starting with ``prefix``; ``label`` names the root) and the
    offending value dropped. ``removed``: keys that no longer exist, with what to do instead."""
    from pydantic import ValidationError

    for _ in range(_MAX_PASSES):
        try:
            return adapter(tp).validate_python(value)
        except ValidationError as error:
            errors = error.errors(include_url=False)
        for e in errors:
            problem = _type_problem(tp, value, prefix, e["type"], e["loc"], label, removed)
            if problem not in problems:
                problems.append(problem)
        drops = {_walk(tp, e["loc"], prefix)[2] for e in errors}
        if () in drops:
            return INVALID
        for path in sorted(drops, key=len, reverse=True):  # inner values first
            value = _without(value, path)
    return INVALID  # pragma: no cover (each pass drops at least one value)


def _walk(tp: Any, loc: tuple[int | str, ...], prefix: str) -> tuple[str, Any, tuple[Any, ...]]:
    """Along pydantic's error location ``loc`` in ``tp``: the dotted key, the type expected
    there (``None`` for an unknown key) and the path of the value to drop (the innermost
    object member: a bad list item takes its list with it)."""
    key = prefix
    drop: tuple[Any, ...] = ()
    for i, part in enumerate(loc):
        if part == "[key]":  # a mapping's key of the wrong type: its entry is dropped
            break
        tp = _without_none(tp)
        if typing.get_origin(tp) is tuple:
            key, tp = f"{key}[{part}]", typing.get_args(tp)[0]
            continue
        key, drop = (f"{key}.{part}" if key else str(part)), loc[: i + 1]
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            tp = _hints(tp).get(str(part))
        else:
            tp = typing.get_args(tp)[1] if typing.get_origin(tp) is dict else None
    return key, tp, drop


def _type_problem(
    tp: Any,
    value: Any,
    prefix: str,
    kind: str,
    loc: tuple[int | str, ...],
    label: str,
    removed: Mapping[str, str],
) -> str:
    key, expected, _ = _walk(tp, loc, prefix)
    if kind == "unexpected_keyword_argument" or expected is None:
        if key in removed:
            return f"{key}: removed: {removed[key]}"
        owner = _walk(tp, loc[:-1], prefix)[1]
        return f"{key}: unknown setting; known: {[f.name for f in dataclasses.fields(owner)]}"
    got = value
    for part in loc[:-1] if loc and loc[-1] == "[key]" else loc:  # a bad key: show its value
        got = got[part]
    return f"{key or label} = {shown(got)}: expected {_describe(expected)}"


def _describe(tp: Any) -> str:
    tp = _without_none(tp)
    if typing.get_origin(tp) is tuple:
        return f"a list of {_describe(typing.get_args(tp)[0])}"
    if typing.get_origin(tp) is dict:
        return "an object of strings"
    if dataclasses.is_dataclass(tp):
        return "an object"
    return {str: "a string", int: "an integer", bool: "true or false"}.get(tp, str(tp))


def _without_none(tp: Any) -> Any:
    """``X`` for ``X | None``."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if typing.get_origin(tp) in (typing.Union, types.UnionType) else tp


@functools.cache
def _hints(tp: Any) -> dict[str, Any]:
    """Type hints of a settings dataclass (resolving hints is slow)."""
    return typing.get_type_hints(tp)


def _without(value: Any, path: tuple[Any, ...]) -> Any:
    """A copy of the JSON-like ``value`` without the member at ``path``."""
    head, rest = path[0], path[1:]
    if isinstance(value, Mapping):
        if not rest:
            return {k: v for k, v in value.items() if k != head}
        return {**value, head: _without(value[head], rest)}
    items = list(value)
    items[head] = _without(items[head], rest)
    return items


def field_problems(section: object, prefix: str) -> list[str]:
    """What the ``rule`` in each field's metadata finds wrong with its value (``None`` is
    never checked: it means the setting is not set)."""
    out: list[str] = []
    # Any: every settings section is a dataclass, which `object` cannot tell mypy.
    for f in dataclasses.fields(typing.cast(Any, section)):
        rule, value = f.metadata.get("rule"), getattr(section, f.name)
        if rule is not None and value is not None:
            out += rule.problems(f"{prefix}{f.name}", value)
    return out
