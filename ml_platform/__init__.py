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


DISTRIBUTION = "cdk-ml-platform"
"""The distribution name in pyproject.toml, the one place the version is written."""


def _version() -> str:
    """The version: from ``pyproject.toml`` beside the package when it is used from a source
    tree (a checkout on ``PYTHONPATH`` or an editable install, whose metadata can be older than
    the tree), else from the installed distribution's metadata, else ``0+unknown``."""
    from pathlib import Path

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if pyproject.is_file():
        import tomllib

        try:
            project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            project = {}
        if project.get("name") == DISTRIBUTION and isinstance(project.get("version"), str):
            return str(project["version"])
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"


__version__ = _version()
