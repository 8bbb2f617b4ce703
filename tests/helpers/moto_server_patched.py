"""``python -m moto.server`` with fixes for two moto 5.2.5 gaps the end-to-end deploy meets.

moto's ``AWS::KMS::Key`` hands CloudFormation's tags (``Key``/``Value``) to KMS's tagger,
which wants KMS's own shape (``TagKey``/``TagValue``): the key is never created and the
stack fails on the first ``Fn::GetAtt`` of it ("references undefined resource"). Real
CloudFormation takes ``Tags`` as ``Key``/``Value``
(https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-kms-key.html),
so the template is right and the server is patched, nothing else.

moto has no CloudFormation model for ``AWS::CloudWatch::Alarm``: it skips the resource, so the
endpoint dashboard's alarm widget, which names the alarm by ``Fn::GetAtt [alarm, Arn]``, fails
the stack ("references undefined resource"). :class:`_CfnAlarm` gives such an alarm its name
and ARN (the CloudWatch ARN format,
https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatch.html)
and nothing else: the alarm is not evaluated, as before.
"""

from __future__ import annotations

import sys
from typing import Any

from moto.core.common_models import CloudFormationModel
from moto.kms.models import Key
from moto.server import main

_create = Key.create_from_cloudformation_json.__func__


def _create_with_kms_tags(
    cls,
    resource_name: str,
    cloudformation_json: Any,
    account_id: str,
    region_name: str,
    **kwargs: Any,
):
    properties = dict(cloudformation_json.get("Properties", {}))
    if properties.get("Tags"):
        properties["Tags"] = [
            {"TagKey": tag["Key"], "TagValue": tag["Value"]} for tag in properties["Tags"]
        ]
    return _create(
        cls,
        resource_name,
        {**cloudformation_json, "Properties": properties},
        account_id,
        region_name,
        **kwargs,
    )


Key.create_from_cloudformation_json = classmethod(_create_with_kms_tags)


class _CfnAlarm(CloudFormationModel):
    """An ``AWS::CloudWatch::Alarm`` with a name and an ARN (moto has no model for it)."""

    # moto's model metaclass files each model under the service its module names.
    __module__ = "moto.cloudwatch.models"

    def __init__(self, name: str, arn: str) -> None:
        self.name, self.arn = name, arn

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::CloudWatch::Alarm"

    @staticmethod
    def cloudformation_name_type() -> str:
        return "AlarmName"

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr == "Arn"

    def get_cfn_attribute(self, attribute_name: str) -> str:
        return self.arn

    @property
    def physical_resource_id(self) -> str:
        return self.name

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[override]
        cls,
        resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> _CfnAlarm:
        name = cloudformation_json.get("Properties", {}).get("AlarmName") or resource_name
        return cls(name, f"arn:aws:cloudwatch:{region_name}:{account_id}:alarm:{name}")

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[override]
        cls,
        resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> None:
        return None


if __name__ == "__main__":
    sys.exit(main())
