"""The storage constructs' props: their rules, checked without building anything."""

from __future__ import annotations

import typing

import aws_cdk as cdk
import pytest

from ml_platform.app import new_app
from ml_platform.config import StorageSettings
from ml_platform.constructs._props import shared_problems
from ml_platform.constructs.storage import (
    RETAIN,
    ModelArtifactBucket,
    ModelArtifactBucketProps,
    TrainingImageRepository,
    TrainingImageRepositoryProps,
)
from ml_platform.limits import MODEL_PREFIX_TEXT
from ml_platform.props.storage import (
    EcrMaxImages,
    ModelArtifactBucketPropsBase,
    TrainingImageRepositoryPropsBase,
)


def _stack() -> cdk.Stack:
    return cdk.Stack(
        new_app(), "S", env=cdk.Environment(account="123456789012", region="us-west-2")
    )


def test_the_repository_props_hold_the_image_count_rule() -> None:
    def problems(props: TrainingImageRepositoryProps) -> list[str]:
        return shared_problems(props, TrainingImageRepositoryPropsBase)

    assert problems(TrainingImageRepositoryProps()) == []
    assert problems(TrainingImageRepositoryProps(max_images=1000)) == []
    assert problems(TrainingImageRepositoryProps(max_images=0)) == [
        "max_images = 0: expected 1 to 1000"
    ]
    stack = _stack()
    with pytest.raises(ValueError, match=r"^S/Bad: max_images = 1001: expected 1 to 1000$"):
        TrainingImageRepository(stack, "Bad", props=TrainingImageRepositoryProps(max_images=1001))
    props = TrainingImageRepositoryProps(max_images=5)
    repo = TrainingImageRepository(stack, "Repo", props=props)
    assert repo.props is props
    assert props == TrainingImageRepositoryProps(max_images=5, removal_policy=RETAIN)


def test_the_settings_count_images_with_the_repository_type() -> None:
    hints = typing.get_type_hints(StorageSettings, include_extras=True)
    base = typing.get_type_hints(TrainingImageRepositoryPropsBase, include_extras=True)
    assert hints["ecr_max_images"] == base["max_images"] == EcrMaxImages


def test_the_bucket_props_hold_the_prefix_rule() -> None:
    def problems(props: ModelArtifactBucketProps) -> list[str]:
        return shared_problems(props, ModelArtifactBucketPropsBase)

    assert problems(ModelArtifactBucketProps()) == []
    assert problems(ModelArtifactBucketProps(model_prefix="x")) == [
        f"model_prefix = 'x': {MODEL_PREFIX_TEXT}"
    ]
    assert issubclass(StorageSettings, ModelArtifactBucketPropsBase)
    stack = _stack()
    with pytest.raises(ValueError, match=r"^S/Bad: model_prefix = 'x': expected a relative "):
        ModelArtifactBucket(stack, "Bad", props=ModelArtifactBucketProps(model_prefix="x"))
    bucket = ModelArtifactBucket(
        stack,
        "Models",
        props=ModelArtifactBucketProps(publishers=("arn:aws:iam::123456789012:role/P",)),
    )
    assert bucket.props == ModelArtifactBucketProps(
        publishers=("arn:aws:iam::123456789012:role/P",)
    )
    assert bucket.model_prefix == bucket.props.model_prefix == "models/"
