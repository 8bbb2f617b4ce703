"""The value fields a construct's props share with a settings section, declared once.

Each module here holds the base class of one construct's props (``PlatformVpcPropsBase`` of
:class:`~ml_platform.constructs.network.PlatformVpcProps`): the fields both the construct and
the ``ml-platform`` settings take, each with its type, its constraints (``Annotated``, from
:mod:`ml_platform.limits`), its default and its docstring, and the cross-field rules between
them (``problems()``, returning :class:`~ml_platform._settings_parse.Problem`). The settings
section inherits the same base and adds only what is app-level, so a new prop is one field:
its docstring is its description in the API reference, the JSON Schema and
docs/configuration.md, and its rules run for a construct built in any app and for the settings.

No module here imports the CDK: the settings are read without starting jsii.
"""

import dataclasses
from typing import Any

__all__ = ["shared_fields"]


def shared_fields(source: Any, base: type) -> dict[str, Any]:
    """The values of ``base``'s fields in ``source`` (a settings section that inherits
    ``base``), by name: what a stack passes on to the construct's props."""
    return {f.name: getattr(source, f.name) for f in dataclasses.fields(base)}
