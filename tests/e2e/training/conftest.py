"""The training fixtures the rendezvous and resume runs use, from the training tests' conftest
(tests/unit/training/conftest.py): default settings (not cdk.json's) and their Volcano Jobs."""

from __future__ import annotations

from tests.unit.training.conftest import manifests, settings, volcano_jobs

__all__ = ["manifests", "settings", "volcano_jobs"]
