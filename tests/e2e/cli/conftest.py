"""The CLI fixtures the end-to-end deploy uses, from the CLI tests' conftest
(tests/unit/cli/conftest.py): the archives built once and the local moto server."""

from __future__ import annotations

from tests.unit.cli.conftest import archives, moto_server

__all__ = ["archives", "moto_server"]
