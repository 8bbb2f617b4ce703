"""The ``mlp`` operator CLI: boto3 against the deployed stacks, one module per command.

* :mod:`~ml_platform_cli.azs` - ``mlp azs``: the AZ that offers Trainium, into cdk.json.
* :mod:`~ml_platform_cli.package` - ``mlp models package``: build the ensemble archives.
* :mod:`~ml_platform_cli.upload` - ``mlp models upload``: put archives under the model prefix.
* :mod:`~ml_platform_cli.invoke` - ``mlp invoke``: one Triton request through the endpoint.
* :mod:`~ml_platform_cli.status` - ``mlp status``: endpoint state and multi-model metrics.
* :mod:`~ml_platform_cli.aws` - settings, sessions, stack outputs and user-facing errors.
"""
