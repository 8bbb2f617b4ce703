"""cdk-nag's :class:`AwsSolutionsChecks`, imported while the settings parser is built.

Importing ``cdk_nag`` makes jsii's Node process load cdk-nag's assembly: about 0.1 s in which
this process only waits for Node's answer, with the GIL released. What synthesis needs next is
Python work of about the same length: importing :mod:`ml_platform.config` and building
pydantic's validators of the sections of :class:`~ml_platform.config.Settings`
(:func:`_settings_parse.member_adapters`; :func:`_settings_parse.adapter` caches them). A thread does that work inside the wait, so pydantic (which #25 brought in) adds
next to nothing to ``cdk synth``; ``make bench`` measures it.

The thread is joined before this module's import returns, so nothing runs after it. It only
imports modules that do not import :mod:`ml_platform.app` (no import-lock cycle) and builds a
cache; whatever fails in it is left for :func:`ml_platform.app.settings_from_app` to raise in the
main thread, where the error belongs.
"""

from __future__ import annotations

import threading


def _build_settings_parser() -> None:
    try:
        from ml_platform._settings_parse import member_adapters
        from ml_platform.config import Settings

        member_adapters(Settings)
    except Exception:  # rebuilt, and raised, in the main thread
        pass


_builder = threading.Thread(target=_build_settings_parser, name="settings-parser", daemon=True)
_builder.start()
try:
    from cdk_nag import AwsSolutionsChecks
finally:
    _builder.join()

__all__ = ["AwsSolutionsChecks"]
