"""How :mod:`ml_platform.config` reads JSON-like context with pydantic v2 and words its errors.

pydantic does the checking, in one pass per top-level section (:func:`validated_members`, so a
bad section hides none of the others' problems): the types of the settings dataclasses (strict
leaves: no ``"2"`` for 2, no 1 for ``true``; JSON arrays for tuples; no unknown keys; ``null``
drops to the default), each field's constraints (``Annotated`` with pydantic's own
``Interval``, ``StringConstraints``, ``Literal`` and ``AfterValidator``, fed by the data in
:mod:`ml_platform.limits`), then each section's cross-field ``problems()``: a model validator
in ``after`` mode, which pydantic runs only once every field of the section is valid, so a bad
field hides its section's cross-field rules (not another section's). :func:`validated` turns
the errors into the settings' own messages (the one formatter): the dotted key, the value and
what is allowed.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, ClassVar, Literal

import annotated_types
from pydantic import AfterValidator, StringConstraints, model_validator
from pydantic_core import PydanticCustomError, core_schema

from ml_platform.limits import IntRange, TextFormat, shown

if typing.TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler

INVALID: Any = object()
"""What :func:`validated` returns when the value does not validate."""

T = typing.TypeVar("T")


def setting(default: T, /, **schema: object) -> T:
    """A settings or props field: its default and what the JSON Schema adds for editors
    (``minItems`` ...) beyond its type's constraints. Its docstring, the string below it, is its
    description. Typed as the default, so type checkers see a field with a default."""
    return dataclasses.field(default=default, metadata={"json_schema_extra": schema or None})


@dataclasses.dataclass(frozen=True)
class Problem:
    """A cross-field problem of a section or props object, stated once and worded by where it
    is read: ``values`` maps each field it names (relative to the object, ``archives[0]`` for
    an item) to its value, ``text`` says what is allowed. A settings section's key prefixes each
    name (``inference.endpoints[0].min_instances = 2, ...: text``); a construct's props are
    named bare (``min_instances = 2, ...: text``)."""

    values: Mapping[str, Any]
    text: str

    def under(self, key: str) -> Problem:
        """The same problem, its fields named under ``key`` (``endpoints[0]``): a section that
        states a member's rules with its own."""
        return dataclasses.replace(self, values={f"{key}.{k}": v for k, v in self.values.items()})

    def worded(self, prefix: str = "") -> str:
        """The message, each field under ``prefix`` (a dotted key, or empty)."""
        at = f"{prefix}." if prefix else ""
        names = ", ".join(f"{at}{k} = {shown(v)}" for k, v in self.values.items())
        return f"{names}: {self.text}" if names else self.text


#: pydantic error types of a value of the right type that a constraint refuses; every other
#: error type (``int_type``, ``dataclass_type`` ...) is a value of the wrong type.
_VALUE_ERRORS = frozenset(
    {
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "literal_error",
        "string_pattern_mismatch",
        "string_too_long",
        "string_too_short",
        "value_error",
    }
)


class Section:
    """Base of the settings dataclasses: how pydantic reads them (a JSON object, no unknown
    keys, no coercion of the leaves) and checks them (a section's ``problems()``,
    its cross-field rules, once every field is valid). Each field's docstring is its
    description: :func:`json_schema` reads them (the parser does not: finding them re-parses
    the module)."""

    __pydantic_config__: ClassVar[dict[str, object]] = {"strict": True, "extra": "forbid"}

    @model_validator(mode="after")
    def _cross_field(self) -> Any:
        check: Callable[[], list[str | Problem]] | None = getattr(self, "problems", None)
        found = check() if check is not None else []
        if found:  # worded in full by problems(): the formatter passes them on
            raise PydanticCustomError("settings", "{problems}", {"problems": found})
        return self


@dataclasses.dataclass(frozen=True)
class Allowed:
    """``Annotated`` metadata: what a setting's error says after ``key = value:`` when a
    constraint refuses its value."""

    text: str


@dataclasses.dataclass(frozen=True)
class OneOf:
    """``Annotated`` metadata: pydantic's ``Literal`` of ``values`` (its check and the JSON
    Schema's ``enum``) after the field's own strict type, so ``true`` is not ``1``; for value
    sets that are data (``limits``, the version tables) rather than spelled in the type."""

    values: tuple[object, ...]

    def __get_pydantic_core_schema__(
        self, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        literal = handler.generate_schema(Literal[self.values])
        return core_schema.chain_schema([handler(source), literal])

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        return {**handler(schema), "enum": list(self.values)}


@dataclasses.dataclass(frozen=True)
class Between(annotated_types.GroupedMetadata):
    """``Annotated`` metadata: ``Interval(ge=low, le=high)`` of an :class:`IntRange`, its
    message ``expected low to high`` with the range's note."""

    range: IntRange

    def __iter__(self) -> Iterator[object]:
        yield annotated_types.Interval(ge=self.range.low, le=self.range.high)
        yield Allowed(f"expected {self.range.text}{self.range.note}")


@dataclasses.dataclass(frozen=True)
class Matches(annotated_types.GroupedMetadata):
    """``Annotated`` metadata: pydantic's ``StringConstraints`` of a :class:`TextFormat`
    (whole-value ``pattern``, ``max_length``), its message ``expected <what it is>``."""

    format: TextFormat

    def __iter__(self) -> Iterator[object]:
        yield from StringConstraints(
            pattern=json_pattern(self.format.regex), max_length=self.format.max_length
        )
        yield Allowed(f"expected {self.format.expected}")


@dataclasses.dataclass(frozen=True)
class Satisfies(annotated_types.GroupedMetadata):
    """``Annotated`` metadata: an ``AfterValidator`` refusing what ``ok`` rejects, with its
    message."""

    ok: Callable[[Any], bool]
    text: str

    def __iter__(self) -> Iterator[object]:
        def check(value: Any) -> Any:
            if not self.ok(value):
                raise ValueError(self.text)
            return value

        yield AfterValidator(check)
        yield Allowed(self.text)


def json_pattern(regex: typing.Pattern[str]) -> str:
    """``regex`` as a ``pattern`` that must match the whole value (JSON Schema and pydantic
    patterns match anywhere)."""
    return f"^(?:{regex.pattern})$"


@functools.cache
def adapter(tp: Any) -> Any:
    """pydantic's validator of ``tp`` (built once: building it takes milliseconds)."""
    from pydantic import TypeAdapter

    if dataclasses.is_dataclass(tp):  # configured by Section
        return TypeAdapter(tp)
    return TypeAdapter(tp, config={"strict": True})


def member_adapters(tp: Any) -> None:
    """Build pydantic's validator of each member of the dataclass ``tp``: the ones
    :func:`validated_members` uses (ahead of time, on a thread: :mod:`ml_platform._cdk_nag`)."""
    for f in dataclasses.fields(tp):
        adapter(_hints(tp)[f.name])


def json_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of ``tp``, with each field's docstring as its description (also a field
    a section inherits: from the props class that declares it)."""
    from pydantic import TypeAdapter

    config = Section.__pydantic_config__
    Section.__pydantic_config__ = {**config, "use_attribute_docstrings": True}
    try:
        schema: dict[str, Any] = TypeAdapter(tp).json_schema()
    finally:
        Section.__pydantic_config__ = config
    sections = {cls.__name__: cls for cls in _sections(tp)}
    for name, definition in [(tp.__name__, schema), *schema.get("$defs", {}).items()]:
        docs = inherited_docstrings(sections[name]) if name in sections else {}
        properties = definition.get("properties", {})
        for key, prop in properties.items():
            if "description" not in prop and key in docs:  # in pydantic's (sorted) key order
                properties[key] = dict(sorted({**prop, "description": docs[key]}.items()))
    return schema


def _sections(tp: Any) -> Iterator[type]:
    """``tp`` and every dataclass its fields hold, at any depth."""
    base = _unwrap(tp)[0]
    if typing.get_origin(base) is tuple:
        yield from _sections(typing.get_args(base)[0])
    elif isinstance(base, type) and dataclasses.is_dataclass(base):
        yield base
        for hint in _hints(base).values():
            yield from _sections(hint)


def inherited_docstrings(cls: type) -> dict[str, str]:
    """The docstring of each field ``cls`` inherits, read from the source of the base class
    that declares it (pydantic reads only the class's own)."""
    import ast
    import inspect
    import itertools
    import textwrap

    docs: dict[str, str] = {}
    for base in cls.__mro__[:0:-1]:
        if not dataclasses.is_dataclass(base):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(base))).body[0]
        statements = getattr(body, "body", [])
        for node, after in itertools.pairwise(statements):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def validated(
    tp: Any, value: Any, prefix: str, problems: list[str], *, label: str, removed: Mapping[str, str]
) -> Any:
    """``value`` as ``tp``, or :data:`INVALID` with every problem pydantic found recorded under
    its dotted key (starting with ``prefix``; ``label`` names the root). The value is read as
    JSON, what the context is: arrays stand for tuples, objects for sections, and the leaves stay
    strict. Unknown keys (:func:`_known`) are reported after the fields' problems and before the
    cross-field rules'; they do not make the value invalid. ``removed``: keys that no longer exist, with what to do instead."""
    from pydantic import ValidationError

    unknown: list[tuple[str, Any]] = []
    known = _known(tp, value, prefix, unknown)
    fields: list[str] = []
    rules: list[str] = []  # the sections' cross-field rules: last, as they run last
    try:
        result = adapter(tp).validate_json(json.dumps(known, default=repr))
    except ValidationError as error:
        result = INVALID
        for e in error.errors(include_url=False):
            found = _problems(tp, e, prefix, label, removed)
            (rules if e["type"] == "settings" else fields).extend(found)
    found = [*fields, *(_unknown(key, owner, removed) for key, owner in unknown), *rules]
    problems.extend(p for p in dict.fromkeys(found) if p not in problems)
    return result


def validated_members(
    tp: Any, value: Any, problems: list[str], *, label: str, removed: Mapping[str, str]
) -> Any:
    """The members of ``value``, a JSON object for the dataclass ``tp``, each validated on its
    own by :func:`validated` (one pydantic pass per member, under its own key), so a bad member
    hides nothing the others report, and what reads only valid members can still run. Returns
    the members set (null is not set), each its value or :data:`INVALID`, in ``tp``'s field
    order; :data:`INVALID` when ``value`` is not an object. Unknown members are reported after
    the others."""
    if not isinstance(value, Mapping):
        validated(tp, value, "", problems, label=label, removed=removed)  # "expected an object"
        return INVALID
    hints = _hints(tp)
    members = {
        f.name: validated(
            hints[f.name], value[f.name], f.name, problems, label=label, removed=removed
        )
        for f in dataclasses.fields(tp)
        if value.get(f.name) is not None
    }
    problems += [_unknown(k, tp, removed) for k in value if k not in hints]
    return members


def _known(tp: Any, value: Any, key: str, unknown: list[tuple[str, Any]]) -> Any:
    """``value`` without the null members of its sections and without their unknown keys,
    which go to ``unknown`` as (dotted key, section type).

    null means "not set": the field keeps its default. One rule for every source: jsii drops
    null members of cdk.json's context before the app sees them, so ``-c`` and the CLI's own
    reading of cdk.json must treat them the same way (null in a list is an error). An unknown
    key is set aside here, null or not, rather than left to pydantic's ``extra="forbid"`` (which
    still gives the JSON Schema its ``additionalProperties: false``): it sets no field, but
    pydantic would then run none of its section's cross-field rules."""
    base = _unwrap(tp)[0]
    if isinstance(base, type) and dataclasses.is_dataclass(base) and isinstance(value, Mapping):
        hints, out = _hints(base), {}
        for k, v in value.items():
            where = f"{key}.{k}" if key else k
            if k not in hints:
                unknown.append((where, base))
            elif v is not None:
                out[k] = _known(hints[k], v, where, unknown)
        return out
    if typing.get_origin(base) is tuple and isinstance(value, list | tuple):
        item = typing.get_args(base)[0]
        return [_known(item, v, f"{key}[{i}]", unknown) for i, v in enumerate(value)]
    return value


def _unknown(key: str, owner: Any, removed: Mapping[str, str]) -> str:
    """The problem of the unknown key ``key`` of the section type ``owner``."""
    if key in removed:
        return f"{key}: removed: {removed[key]}"
    return f"{key}: unknown setting; known: {[f.name for f in dataclasses.fields(owner)]}"


def _problems(
    tp: Any, error: Any, prefix: str, label: str, removed: Mapping[str, str]
) -> list[str]:
    """One pydantic error in the settings' words."""
    kind, loc, got = error["type"], tuple(error["loc"]), error["input"]
    if kind == "settings":  # a section's cross-field rules: its problems(), under its key
        at = _walk(tp, loc, prefix)[0]
        return [p.worded(at) if isinstance(p, Problem) else p for p in error["ctx"]["problems"]]
    key, expected = _walk(tp, loc, prefix)
    if kind == "unexpected_keyword_argument" or expected is None:  # :func:`_known` sets them aside
        return [_unknown(key, _unwrap(_walk(tp, loc[:-1], prefix)[1])[0], removed)]
    base, metadata = _unwrap(expected)
    if kind not in _VALUE_ERRORS:
        return [f"{key or label} = {shown(got)}: expected {_describe(base)}"]
    texts = [m.text for m in metadata if isinstance(m, Allowed)]
    choices = [m.values for m in metadata if isinstance(m, OneOf)]
    if texts:
        allowed = texts[-1]
    elif choices:
        allowed = f"expected one of {list(choices[0])}"
    else:
        allowed = error["msg"].removeprefix("Value error, ")
    return [f"{key or label} = {shown(got)}: {allowed}"]


def _walk(tp: Any, loc: tuple[int | str, ...], prefix: str) -> tuple[str, Any]:
    """Along pydantic's error location ``loc`` in ``tp``: the dotted key and the type expected
    there (``None`` for an unknown key)."""
    key = prefix
    for part in loc:
        base = _unwrap(tp)[0]
        if isinstance(part, int):  # a list item (JSON object keys are strings)
            key = f"{key}[{part}]"
            tp = typing.get_args(base)[0] if typing.get_origin(base) is tuple else None
            continue
        key = f"{key}.{part}" if key else part
        if isinstance(base, type) and dataclasses.is_dataclass(base):
            tp = _hints(base).get(part)
        else:
            tp = typing.get_args(base)[1] if typing.get_origin(base) is dict else None
    return key, tp


def _unwrap(tp: Any) -> tuple[Any, list[object]]:
    """``X`` and its ``Annotated`` metadata (grouped metadata spread out) for ``X | None`` or
    ``Annotated[X, ...]``."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    metadata: list[object] = []
    if typing.get_origin(tp) is Annotated:
        for item in tp.__metadata__:
            grouped = isinstance(item, annotated_types.GroupedMetadata)
            metadata += list(typing.cast(Any, item)) if grouped else [item]
        tp = typing.get_args(tp)[0]
    return tp, metadata


def _describe(tp: Any) -> str:
    tp = _unwrap(tp)[0]
    if typing.get_origin(tp) is tuple:
        return f"a list of {_describe(typing.get_args(tp)[0])}"
    if typing.get_origin(tp) is dict:
        return "an object of strings"
    if dataclasses.is_dataclass(tp):
        return "an object"
    return {str: "a string", int: "an integer", bool: "true or false"}.get(tp, str(tp))


@functools.cache
def _hints(tp: Any) -> dict[str, Any]:
    """Type hints of a settings dataclass, with their ``Annotated`` metadata (resolving hints
    is slow)."""
    return typing.get_type_hints(tp, include_extras=True)
