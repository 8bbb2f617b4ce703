"""Stacks that compose the platform's constructs."""

from ml_platform.stacks.inference import InferenceStack
from ml_platform.stacks.network import NetworkStack
from ml_platform.stacks.storage import StorageStack
from ml_platform.stacks.training_cluster import TrainingClusterStack

__all__ = ["InferenceStack", "NetworkStack", "StorageStack", "TrainingClusterStack"]
