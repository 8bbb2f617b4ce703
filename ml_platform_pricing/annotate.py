"""Synth-time cost annotations (the ``cost_annotations`` setting).

Here rather than in :mod:`ml_platform.app`: the construct library never imports the estimator.
The project's ``app.py`` calls :func:`annotate_costs` on the stacks ``build_platform`` made.
"""

from __future__ import annotations

import aws_cdk as cdk

from ml_platform_pricing.assembly import template_in_memory
from ml_platform_pricing.estimate import estimate_template
from ml_platform_pricing.table import PriceTable

__all__ = ["annotate_costs"]


def annotate_costs(stacks: list[cdk.Stack]) -> None:
    """An info annotation on each stack with its estimated on-demand cost (shipped prices)."""
    table = PriceTable.load()
    for stack in stacks:
        if cdk.Token.is_unresolved(stack.region):
            cdk.Annotations.of(stack).add_info(
                f"No cost estimate for {stack.stack_name}: the stack has no region"
            )
            continue
        estimate = estimate_template(
            template_in_memory(stack, priced_only=True),
            stack=stack.stack_name,
            region=stack.region,
            table=table,
        )
        cdk.Annotations.of(stack).add_info(estimate.summary())
