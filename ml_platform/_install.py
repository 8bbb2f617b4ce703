"""How to install an extra of cdk-ml-platform, said the same way everywhere.

The distribution is not published on PyPI, so ``pip install cdk-ml-platform`` finds nothing:
it installs from a clone (editable) or from a path to one, or from the wheel ``python -m build``
writes.
"""

from __future__ import annotations


def install_hint(extra: str) -> str:
    """The commands that install ``extra`` (e.g. ``"cli"``)."""
    return (
        f"pip install -e '.[{extra}]' in a clone (or make install), or "
        f"pip install '/path/to/cdk-ml-platform[{extra}]'"
    )
