"""The instance-type table is botocore's EC2 model (the source it cites), type for type."""

from __future__ import annotations

import botocore
import botocore.session

from ml_platform.ec2_instance_types import FAMILIES, SOURCE, instance_type_problem


def test_the_table_is_the_installed_botocore_instance_type_enum() -> None:
    enum = botocore.session.get_session().get_service_model("ec2").shape_for("InstanceType").enum
    table = {f"{family}.{size}" for family, sizes in FAMILIES.items() for size in sizes.split()}
    assert table == set(enum)
    assert f"botocore {botocore.__version__}," in SOURCE  # regenerate when botocore moves


def test_problems_name_the_family_sizes() -> None:
    assert instance_type_problem("m6i.large") is None
    assert instance_type_problem("trn1.32xlarge") is None
    assert instance_type_problem("g5.3xlarge") == (
        "g5 comes in xlarge, 2xlarge, 4xlarge, 8xlarge, 12xlarge, 16xlarge, 24xlarge, 48xlarge"
    )
