"""cdk-ml-platform: AWS CDK and cdk8s building blocks for Trainium training and Triton serving.

Subpackages:

* :mod:`ml_platform.config` - typed, validated settings read once from ``cdk.json`` context.
* :mod:`ml_platform.constructs` - reusable CDK constructs (one logical unit each).
* :mod:`ml_platform.stacks` - stacks that compose the constructs.
* :mod:`ml_platform.k8s_charts` - cdk8s charts for the Kubernetes side.
"""

from ml_platform._node import prefer_project_node

# Before any jsii import: jsii runs the project's pinned Node (not an end-of-life system one).
prefer_project_node()

__version__ = "0.1.0"
