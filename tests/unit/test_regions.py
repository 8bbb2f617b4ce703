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
