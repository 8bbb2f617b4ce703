"""The pinned region list (ml_platform/regions.py) equals botocore's partition data, and
synthesis never imports botocore to use it."""

from __future__ import annotations

import subprocess
import sys

import botocore
import botocore.session

from ml_platform.regions import DNS_SUFFIXES, REGIONS, SOURCE_BOTOCORE_VERSION, partition_of
from tests.helpers.cli import REPO


def test_the_list_is_botocores_partitions_regions():
    data = botocore.session.get_session().get_data("endpoints")
    expected = {region: p["partition"] for p in data["partitions"] for region in p["regions"]}
    assert REGIONS == expected
    # Each partition's domain, which CloudFormation's AWS::URLSuffix resolves to.
    assert DNS_SUFFIXES == {p["partition"]: p["dnsSuffix"] for p in data["partitions"]}
    assert botocore.__version__ == SOURCE_BOTOCORE_VERSION


def test_partition_of_known_and_unlisted_regions():
    assert partition_of("cn-northwest-1") == "aws-cn"
    assert partition_of("us-gov-west-1") == "aws-us-gov"
    assert partition_of("us-isof-south-1") == "aws-iso-f"
    assert partition_of("eusc-de-east-1") == "aws-eusc"
    assert partition_of("us-isob-west-9") == "aws-iso-b"  # not listed: by prefix
    assert partition_of("us-west-2") == "aws"


def test_settings_do_not_import_botocore():
    code = (
        "import sys\nfrom ml_platform.config import Settings, SettingsError\n"
        "try:\n    Settings.from_context({'env': {'region': 'us-foo-1'}})\n"
        "except SettingsError as error:\n    assert 'not an AWS region' in str(error)\n"
        "print('botocore' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


def test_every_ecr_registry_host_takes_its_partitions_domain() -> None:
    from ml_platform.config import Settings
    from ml_platform.regions import ecr_registry, parse_ecr_registry
    from ml_platform.sagemaker_images import triton_image_uri
    from ml_platform.versions import eks_registry

    assert (
        ecr_registry("111122223333", "us-west-2") == "111122223333.dkr.ecr.us-west-2.amazonaws.com"
    )
    assert ecr_registry("1", "cn-north-1") == "1.dkr.ecr.cn-north-1.amazonaws.com.cn"
    assert ecr_registry("1", "us-gov-west-1") == "1.dkr.ecr.us-gov-west-1.amazonaws.com"
    assert ecr_registry("1", "us-iso-east-1") == "1.dkr.ecr.us-iso-east-1.c2s.ic.gov"
    # The three registries the platform names (EKS's, SageMaker's Triton, the training
    # image's) all take the host from it.
    for region, domain in (("us-west-2", "amazonaws.com"), ("cn-north-1", "amazonaws.com.cn")):
        host = f".dkr.ecr.{region}.{domain}"
        assert eks_registry(region).endswith(host)
        assert triton_image_uri(region, "24.09").split("/")[0].endswith(host)
        settings = Settings.from_context(
            {
                "env": {"account": "111122223333", "region": region},
                "network": {
                    "availability_zones": [f"{region}a", f"{region}b"],
                    "trainium_az": f"{region}b",
                },
                "features": {"inference": False},
            }
        )
        assert settings.training_image_uri.startswith(f"111122223333{host}/")
    # ... and reads back: mlp images resolve asks ECR for what the platform names.
    for region in ("us-west-2", "cn-north-1", "us-iso-east-1", "eusc-de-east-1"):
        assert parse_ecr_registry(ecr_registry("111122223333", region)) == ("111122223333", region)
    assert parse_ecr_registry("111122223333.dkr.ecr.us-west-2.example.com") is None
    assert parse_ecr_registry("ghcr.io") is None
