"""Stacks that compose the platform's constructs."""

from ml_platform.stacks.network import NetworkStack
from ml_platform.stacks.storage import StorageStack

__all__ = ["NetworkStack", "StorageStack"]
