"""Fail loudly when a plain dict stands in for a jsii struct.

jsii serializes a Python ``dict`` as a JavaScript map, key for key: where the JavaScript side
expects a struct (``ArnComponents``, ``PolicyStatementProps``...), snake_case keys such as
``resource_name`` do not match its camelCase fields and are dropped without a word. That is how
the endpoint's log ARN lost its log-group name. Only the struct classes carry the
snake_case -> camelCase mapping, so the one dependable check is at the point where values cross
into jsii: a dict whose keys include a snake_case field name of any loaded jsii struct is a
struct passed as a dict. :func:`install` makes that a ``TypeError`` for the whole test session,
so every construct the tests build (the whole app included) is checked.
"""

from __future__ import annotations

import typing
from typing import Any

import jsii._kernel as kernel_module
from jsii import _reference_map

_original = kernel_module._make_reference_for_native


_cache: dict[str, Any] = {"count": -1, "fields": {}}


def snake_case_struct_fields() -> dict[str, set[str]]:
    """Every snake_case Python field name of the loaded jsii structs -> the structs having it
    (recomputed only when more struct classes have been imported)."""
    if _cache["count"] == len(_reference_map._data_types):
        return _cache["fields"]
    fields: dict[str, set[str]] = {}
    for fqn, struct in list(_reference_map._data_types.items()):
        for python_name, jsii_name in getattr(struct, "__jsii_name_mapping__", {}).items():
            if python_name != jsii_name:
                fields.setdefault(python_name, set()).add(fqn)
    _cache.update(count=len(_reference_map._data_types), fields=fields)
    return fields


class StructGivenAsDict(TypeError):
    """A dict with a jsii struct's snake_case keys was passed to jsii."""


_maps: set[int] = set()  # ids of dicts that are struct fields typed as maps (context, tags...)
_unchecked = [0]  # depth inside such a map


def _map_fields(struct_type: type) -> frozenset[str]:
    """Fields of a struct whose type is a map or Any (a dict there is data, not a struct)."""
    if struct_type not in _map_field_cache:
        hints = typing.get_type_hints(struct_type.__init__)
        _map_field_cache[struct_type] = frozenset(
            name
            for name in struct_type.__jsii_name_mapping__
            if not _mentions_struct(hints.get(name, typing.Any))
        )
    return _map_field_cache[struct_type]


_map_field_cache: dict[type, frozenset[str]] = {}


def _mentions_struct(hint: Any) -> bool:
    if hasattr(hint, "__jsii_name_mapping__"):
        return True
    return any(_mentions_struct(arg) for arg in typing.get_args(hint))


def _checked(kernel: Any, value: Any) -> Any:
    if _unchecked[0] or (isinstance(value, dict) and id(value) in _maps):
        _unchecked[0] += 1
        try:
            return _original(kernel, value)
        finally:
            _unchecked[0] -= 1
    mapping = getattr(type(value), "__jsii_name_mapping__", None)
    if mapping is not None:
        maps = [getattr(value, name) for name in _map_fields(type(value))]
        marked = {id(m) for m in maps if isinstance(m, dict)} - _maps
        _maps.update(marked)
        try:
            return _original(kernel, value)
        finally:
            _maps.difference_update(marked)
    if isinstance(value, dict):
        fields = snake_case_struct_fields()
        lost = sorted(k for k in value if isinstance(k, str) and k in fields)
        if lost:
            structs = sorted({fqn for k in lost for fqn in fields[k]})[:5]
            raise StructGivenAsDict(
                f"a dict with keys {lost} was passed to jsii, which drops snake_case keys of a "
                f"dict given for a struct: pass the typed struct instead (one of {structs})"
            )
    return _original(kernel, value)


def install() -> None:
    """Check every value that crosses into jsii (idempotent)."""
    kernel_module._make_reference_for_native = _checked


def installed() -> bool:
    return kernel_module._make_reference_for_native is _checked
