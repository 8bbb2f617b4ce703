"""The CLI fixtures the end-to-end deploy uses, from the CLI tests' conftest
(tests/unit/ml_platform_cli/conftest.py): the archives built once, the local moto server, the
isolated AWS environment and the in-process `mlp` runner."""

from __future__ import annotations

from tests.unit.ml_platform_cli.conftest import archives, aws_env, mlp, moto_server

__all__ = ["archives", "aws_env", "mlp", "moto_server"]
