"""``python -m moto.server`` with a fix for one moto 5.2.5 bug the end-to-end deploy meets.

moto's ``AWS::KMS::Key`` hands CloudFormation's tags (``Key``/``Value``) to KMS's tagger,
which wants KMS's own shape (``TagKey``/``TagValue``): the key is never created and the
stack fails on the first ``Fn::GetAtt`` of it ("references undefined resource"). Real
CloudFormation takes ``Tags`` as ``Key``/``Value``
(https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-kms-key.html),
so the template is right and the server is patched, nothing else.
"""

from __future__ import annotations

import sys
from typing import Any

from moto.kms.models import Key
from moto.server import main

_create = Key.create_from_cloudformation_json.__func__


def _create_with_kms_tags(cls, resource_name: str, cloudformation_json: Any, account_id: str,
                          region_name: str, **kwargs: Any):
    properties = dict(cloudformation_json.get("Properties", {}))
    if properties.get("Tags"):
        properties["Tags"] = [
            {"TagKey": tag["Key"], "TagValue": tag["Value"]} for tag in properties["Tags"]
        ]
    return _create(cls, resource_name, {**cloudformation_json, "Properties": properties},
                   account_id, region_name, **kwargs)


Key.create_from_cloudformation_json = classmethod(_create_with_kms_tags)

if __name__ == "__main__":
    sys.exit(main())
