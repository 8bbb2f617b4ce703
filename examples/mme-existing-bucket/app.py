"""Triton ensembles on a SageMaker multi-model endpoint over a bucket that already exists,
and a role of the team's that may invoke one archive of it."""

import aws_cdk as cdk
from aws_cdk import aws_iam as iam

from ml_platform.app import new_app
from ml_platform.constructs import (
    ModelArtifactBucket,
    TritonMultiModelEndpoint,
    TritonMultiModelEndpointProps,
)

ENV = cdk.Environment(account="111122223333", region="us-east-1")


def build(app: cdk.App) -> None:
    stack = cdk.Stack(app, "Serving", env=ENV)
    models = ModelArtifactBucket.from_bucket_name(
        stack, "Models", "team-triton-archives", model_prefix="ensembles/"
    )
    endpoint = TritonMultiModelEndpoint(
        stack,
        "Ensembles",
        bucket=models,
        props=TritonMultiModelEndpointProps(
            name="team-ensembles",
            archives=("model_trt_python_t4", "model_tf_dali"),
            max_instances=3,
        ),
    )
    caller = iam.Role(
        stack,
        "Caller",
        assumed_by=iam.AccountPrincipal("111122223333"),
        description="The search service: calls the text ensemble only",
    )
    endpoint.grant_invoke(caller, ["model_trt_python_t4"])


if __name__ == "__main__":
    app = new_app()
    build(app)
    app.synth()
