"""Cost of what a synthesized app deploys: the shipped price table and the estimator."""

from ml_platform_pricing.estimate import (
    FREE,
    MISSING,
    OK,
    PRICED,
    UNCLASSIFIED,
    UNKNOWN,
    UNPRICED,
    USAGE_BASED,
    LineItem,
    MultiModelComparison,
    StackEstimate,
    classify,
    compare_multi_model,
    estimate_template,
    training_hourly,
)
from ml_platform_pricing.table import HOURS_PER_MONTH, HOURS_PER_YEAR, Price, PriceTable

__all__ = [
    "FREE",
    "HOURS_PER_MONTH",
    "HOURS_PER_YEAR",
    "MISSING",
    "OK",
    "PRICED",
    "UNCLASSIFIED",
    "UNKNOWN",
    "UNPRICED",
    "USAGE_BASED",
    "LineItem",
    "MultiModelComparison",
    "Price",
    "PriceTable",
    "StackEstimate",
    "classify",
    "compare_multi_model",
    "estimate_template",
    "training_hourly",
]
