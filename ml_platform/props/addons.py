"""The add-ons' field that the ``cluster`` settings take too: the VPC CNI's NetworkPolicy mode
(:class:`PlatformAddonsPropsBase`, inherited by
:class:`~ml_platform.constructs.addons.PlatformAddonsProps` and
:class:`~ml_platform.config.ClusterSettings`)."""

__all__ = ["PlatformAddonsPropsBase"]

from dataclasses import dataclass
from typing import Annotated

from ml_platform import limits
from ml_platform._settings_parse import OneOf, Section, setting


@dataclass(frozen=True, kw_only=True)
class PlatformAddonsPropsBase(Section):
    """The add-ons' value props that the settings share."""

    network_policy_mode: Annotated[str, OneOf(limits.NETWORK_POLICY_MODES)] = setting(
        limits.DEFAULT_NETWORK_POLICY_MODE
    )
    """The VPC CNI's NetworkPolicy enforcing mode: `strict` (a new pod is default-deny until
    its policies are in place; the system namespaces get allow-all policies) or `standard` (a
    new pod talks freely until then)."""
