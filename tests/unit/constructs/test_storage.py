"""The storage constructs' props: their rules, checked without building anything."""

from __future__ import annotations

import aws_cdk as cdk
import pytest

from ml_platform.app import new_app
from ml_platform.constructs.storage import (
    RETAIN,
    ModelArtifactBucket,
    ModelArtifactBucketProps,
    TrainingImageRepository,
    TrainingImageRepositoryProps,
)


def _stack() -> cdk.Stack:
    return cdk.Stack(
        new_app(), "S", env=cdk.Environment(account="123456789012", region="us-west-2")
    )


def test_the_repository_props_hold_the_image_count_rule() -> None:
    assert TrainingImageRepositoryProps().problems() == []
    assert TrainingImageRepositoryProps(max_images=1000).problems() == []
    assert TrainingImageRepositoryProps(max_images=0).problems() == [
        "max_images=0: expected 1 to 1000"
    ]
    stack = _stack()
    with pytest.raises(ValueError, match=r"^S/Bad: max_images=1001: expected 1 to 1000$"):
        TrainingImageRepository(stack, "Bad", max_images=1001)
    repo = TrainingImageRepository(stack, "Repo", max_images=5)
    assert repo.props == TrainingImageRepositoryProps(max_images=5, removal_policy=RETAIN)


def test_the_bucket_props_hold_the_prefix_rule() -> None:
    assert ModelArtifactBucketProps().problems() == []
    assert [p.split("=", 1)[0] for p in ModelArtifactBucketProps(model_prefix="x").problems()] == [
        "model_prefix"
    ]
    stack = _stack()
    with pytest.raises(ValueError, match=r"^S/Bad: model_prefix='x': "):
        ModelArtifactBucket(stack, "Bad", model_prefix="x")
    bucket = ModelArtifactBucket(stack, "Models", publishers=["arn:aws:iam::123456789012:role/P"])
    assert bucket.props == ModelArtifactBucketProps(
        publishers=("arn:aws:iam::123456789012:role/P",)
    )
    assert bucket.model_prefix == bucket.props.model_prefix == "models/"
