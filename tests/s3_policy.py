"""The Deny half of S3 bucket-policy evaluation, for the operators the platform's policies use.

A request is refused when any Deny statement matches its action, resource and conditions
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html).
Condition semantics from the IAM condition-operator reference
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html):
a negated operator (``ArnNotLike``) holds when the key is absent, ``Null: true`` holds when it
is absent, ``Bool`` and the positive operators need the key. An operator not listed here raises,
so a policy using one is never judged by a guess. moto ignores all of them but
``StringEquals``, hence this module.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any


def _values(value: Any) -> list[str]:
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def _holds(operator: str, key: str, expected: list[str], context: dict[str, str]) -> bool:
    actual = context.get(key)
    if operator == "Null":
        return (actual is None) == (expected == ["true"])
    if operator in ("ArnNotLike", "StringNotLike"):
        return actual is None or not any(fnmatchcase(actual, e) for e in expected)
    if actual is None:
        return False
    if operator == "Bool":
        return actual.lower() in [e.lower() for e in expected]
    if operator in ("ArnLike", "StringLike"):
        return any(fnmatchcase(actual, e) for e in expected)
    if operator in ("ArnEquals", "StringEquals"):
        return actual in expected
    raise NotImplementedError(f"condition operator {operator} is not modelled")


def _matches(patterns: Any, value: str) -> bool:
    return any(fnmatchcase(value, p) for p in _values(patterns))


def denied(policy: dict, action: str, resource: str, context: dict[str, str]) -> list[str]:
    """Sids of the Deny statements of ``policy`` (resolved JSON) that refuse the request."""
    out = []
    for statement in policy["Statement"]:
        if statement["Effect"] != "Deny":
            continue
        # An identity policy's statements name no principal: they apply to whoever holds them.
        if statement.get("Principal", "*") not in ("*", {"AWS": "*"}):
            raise NotImplementedError(f"principal {statement.get('Principal')} is not modelled")
        if "NotAction" in statement:  # every action but the listed ones
            if _matches(statement["NotAction"], action):
                continue
        elif not _matches(statement["Action"], action):
            continue
        if not _matches(statement["Resource"], resource):
            continue
        conditions = statement.get("Condition", {})
        if all(
            _holds(operator, key, _values(expected), context)
            for operator, keys in conditions.items()
            for key, expected in keys.items()
        ):
            out.append(statement.get("Sid", "?"))
    return out
