"""The value fields of the storage constructs that the ``storage`` settings take too: the model
bucket's archive prefix (:class:`ModelArtifactBucketPropsBase`, inherited by
:class:`~ml_platform.constructs.storage.ModelArtifactBucketProps` and
:class:`~ml_platform.config.StorageSettings`) and the training image repository's image count
(:data:`EcrMaxImages`: the settings name it ``ecr_max_images``, so the type is shared, not the
field)."""

from dataclasses import dataclass
from typing import Annotated, TypeAlias

import annotated_types

from ml_platform import limits
from ml_platform._settings_parse import Between, Satisfies, Section, setting

__all__ = ["EcrMaxImages", "ModelArtifactBucketPropsBase", "TrainingImageRepositoryPropsBase"]

EcrMaxImages: TypeAlias = Annotated[int, Between(limits.ECR_MAX_IMAGES)]
"""Images an ECR lifecycle rule keeps (aws-cdk's ``ecr.LifecycleRule`` checks only that a count
or an age is set, not its range: aws-cdk-lib 2.275.0, ``aws-ecr/lib/repository.js``)."""


@dataclass(frozen=True, kw_only=True)
class TrainingImageRepositoryPropsBase(Section):
    """The checked value props of :class:`~ml_platform.constructs.storage.TrainingImageRepository`
    (the settings' ``storage.ecr_max_images`` has the same type, :data:`EcrMaxImages`)."""

    # An int (ruff does not see through the alias): setting() only declares the field.
    max_images: EcrMaxImages = setting(limits.DEFAULT_ECR_MAX_IMAGES)  # noqa: RUF009
    """Images the repository keeps before the oldest expire (untagged ones expire after a
    week)."""


@dataclass(frozen=True, kw_only=True)
class ModelArtifactBucketPropsBase(Section):
    """The value props of :class:`~ml_platform.constructs.storage.ModelArtifactBucket` that
    the ``storage`` settings take too."""

    model_prefix: Annotated[
        str,
        annotated_types.MaxLen(limits.MODEL_PREFIX_MAX),
        Satisfies(limits.model_prefix_ok, limits.MODEL_PREFIX_TEXT),
    ] = setting(limits.DEFAULT_MODEL_PREFIX)
    """S3 key prefix of the Triton model archives: ends in `/`, at most 512 characters,
    segments of `A-Za-z0-9._-`, none empty, `.` or `..`."""
