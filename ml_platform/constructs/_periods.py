"""The CloudWatch periods the metric helpers and dashboards default to, each made once.

A ``Duration`` is an immutable value, so one object serves every metric; making it anew for
each metric cost a round trip into jsii each time (dozens per synth).
"""

from __future__ import annotations

import functools

from aws_cdk import Duration

ONE_MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)
ONE_DAY = Duration.days(1)


@functools.cache
def seconds(period: Duration) -> int:
    """``period`` in whole seconds (asked of jsii once per ``Duration`` object)."""
    return int(period.to_seconds())
