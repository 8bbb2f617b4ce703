"""``mlp azs`` against moto's EC2 offerings: AZ-ID to name mapping, the deep merge, the files
(cdk.json, where the CDK CLI's merge lets the settings win)."""

from __future__ import annotations

import json
import shutil

import pytest

from ml_platform.config import CONTEXT_KEY, deep_merge, settings_from_cdk_json
from ml_platform_cli.azs import choose_azs
from tests.helpers.cli import REPO

# moto's us-west-2: trn1.32xlarge in usw2-az1 and usw2-az4; usw2-az1 is named us-west-2b
# and usw2-az4 us-west-2d (the letters do not follow the IDs, as in real accounts).
REGION_AZS = ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"]
AZ_KEY = "availability-zones:account=123456789012:region=us-west-2"


def _written(cdk_json) -> dict:
    """The ``ml-platform`` object of cdk.json, where ``mlp azs`` writes."""
    return json.loads(cdk_json.read_text())["context"][CONTEXT_KEY]


def _customise(cdk_json, **changes) -> dict:
    """Add settings to the project's cdk.json object; returns the new object."""
    project = json.loads(cdk_json.read_text())
    project["context"][CONTEXT_KEY] = deep_merge(project["context"][CONTEXT_KEY], changes)
    cdk_json.write_text(json.dumps(project, indent=2))
    return project["context"][CONTEXT_KEY]


def test_writes_the_mapped_az_into_cdk_json_where_cdk_reads_it(aws, project, mlp):
    original = _customise(project, storage={"ecr_max_images": 50}, training={"queue": "bert"})
    before = json.loads(project.read_text())

    result = mlp("--cdk-json", project, "azs", "--admin-role-mine")

    assert result.code == 0, result.err
    assert "usw2-az1 (us-west-2b), usw2-az4 (us-west-2d)" in result.out
    after = json.loads(project.read_text())
    # cdk.json holds this account's AZ key already: it is updated there (it would win over
    # cdk.context.json), so no cdk.context.json is needed.
    assert after["context"][AZ_KEY] == REGION_AZS
    assert not project.with_name("cdk.context.json").exists()
    expected = deep_merge(
        original,
        {
            "env": {"account": "123456789012", "region": "us-west-2"},
            "network": {
                "availability_zones": ["us-west-2a", "us-west-2b", "us-west-2d"],
                "trainium_az": "us-west-2b",
            },
        },
    )
    assert after["context"][CONTEXT_KEY] == expected
    # moto's default caller is the IAM user arn:aws:iam::123456789012:user/moto: not a role,
    # so no cluster.admin_role_arn is written (expected has none), and the output says so.
    assert "is not an IAM role; cluster.admin_role_arn not written" in result.out
    # Everything else of cdk.json stays as it was, in its order.
    assert list(after) == list(before)
    assert list(after["context"]) == list(before["context"])
    assert {k: v for k, v in after.items() if k != "context"} == {
        k: v for k, v in before.items() if k != "context"
    }
    assert after["context"][CONTEXT_KEY]["storage"] == {
        "fsx_storage_gib": 1200,
        "removal_policy": "retain",
        "ecr_max_images": 50,
    }
    assert after["context"][CONTEXT_KEY]["training"] == {"queue": "bert"}
    # What synthesis will now see.
    settings = settings_from_cdk_json(str(project))
    assert settings.network.trainium_az == "us-west-2b"
    assert settings.storage.ecr_max_images == 50


def test_cdk_json_keeps_its_indent(aws, project, mlp):
    project.write_text(json.dumps(json.loads(project.read_text()), indent=4) + "\n")
    assert mlp("--cdk-json", project, "azs", "--admin-role-mine").code == 0
    text = project.read_text()
    assert text == json.dumps(json.loads(text), indent=4) + "\n"


def test_az_id_picks_among_the_offered_ids(aws, project, mlp):
    result = mlp("--cdk-json", project, "azs", "--admin-role-mine", "--az-id", "usw2-az4")
    assert result.code == 0, result.err
    written = _written(project)
    assert written["network"]["trainium_az"] == "us-west-2d"


def test_instance_type_option_and_setting(aws, project, mlp):
    # trn1n.32xlarge is only in usw2-az4 in moto's data.
    assert (
        mlp(
            "--cdk-json", project, "azs", "--admin-role-mine", "--instance-type", "trn1n.32xlarge"
        ).code
        == 0
    )
    written = _written(project)
    assert written["network"]["trainium_az"] == "us-west-2d"

    shutil.copy(REPO / "cdk.json", project)  # back to the shipped settings
    _customise(project, trainium={"instance_type": "trn1n.32xlarge"})
    assert mlp("--cdk-json", project, "azs", "--admin-role-mine").code == 0
    written = _written(project)
    assert written["network"]["trainium_az"] == "us-west-2d"
    assert written["trainium"]["instance_type"] == "trn1n.32xlarge"


def test_unoffered_az_id_is_refused_and_nothing_written(aws, project, mlp):
    result = mlp("--cdk-json", project, "azs", "--admin-role-mine", "--az-id", "usw2-az3")
    assert result.code == 1
    assert result.err.strip() == (
        "mlp: error: --az-id usw2-az3: trn1.32xlarge is offered in us-west-2 only in "
        "usw2-az1 (us-west-2b), usw2-az4 (us-west-2d)"
    )
    assert not project.with_name("cdk.context.json").exists()


def test_dry_run_prints_and_writes_nothing(aws, project, mlp):
    before = project.read_text()
    result = mlp("--cdk-json", project, "azs", "--admin-role-mine", "--dry-run")
    assert result.code == 0, result.err
    assert not project.with_name("cdk.context.json").exists()
    assert project.read_text() == before
    assert f"--dry-run: would write {project} (key 'ml-platform', key '{AZ_KEY}'):" in result.out
    printed = json.loads(result.out[result.out.index("{") :])
    assert printed["context"][AZ_KEY] == REGION_AZS
    assert printed["context"][CONTEXT_KEY]["network"]["trainium_az"] == "us-west-2b"


def test_an_object_left_in_cdk_context_json_is_folded_into_cdk_json(aws, project, mlp):
    """An earlier version wrote the ``ml-platform`` object into cdk.context.json, where the
    CDK CLI lets cdk.json's keys win. It moves into cdk.json as the CLI merged it (so only
    this command's keys change what synthesis sees); other lookups stay."""
    local = project.with_name("cdk.context.json")
    lookup = "vpc-provider:account=123456789012:filter.vpc-id=vpc-1:region=us-west-2"
    local.write_text(
        json.dumps(
            {
                lookup: {"vpcId": "vpc-1"},
                CONTEXT_KEY: {
                    "env": {"account": "123456789012", "region": "us-west-2"},
                    "network": {"availability_zones": ["us-west-2a", "us-west-2d"]},
                    "training": {"queue": "from-context-file"},
                },
                AZ_KEY: ["us-west-2a", "us-west-2d"],
            }
        )
    )
    result = mlp("--cdk-json", project, "azs", "--admin-role-mine")
    assert result.code == 0, result.err
    assert "'ml-platform' moved into cdk.json" in result.out
    written = json.loads(local.read_text())
    assert written == {lookup: {"vpcId": "vpc-1"}}  # the AZ key lives in cdk.json here
    after = json.loads(project.read_text())["context"]
    assert after[AZ_KEY] == REGION_AZS
    # cdk.json's own keys kept, the file's extra key folded in, this command's keys set.
    assert after[CONTEXT_KEY]["storage"]["fsx_storage_gib"] == 1200
    assert after[CONTEXT_KEY]["training"] == {"queue": "from-context-file"}
    assert after[CONTEXT_KEY]["network"]["availability_zones"] == [
        "us-west-2a",
        "us-west-2b",
        "us-west-2d",
    ]
    assert settings_from_cdk_json(str(project)).network.trainium_az == "us-west-2b"


def test_the_az_names_of_another_account_go_to_cdk_context_json(aws_env, project, mlp, monkeypatch):
    """The AZ list is a lookup cache: cdk.context.json, unless cdk.json holds its key."""
    from moto import mock_aws

    monkeypatch.setenv("MOTO_ACCOUNT_ID", "111122223333")
    with mock_aws():
        result = mlp("--cdk-json", project, "azs", "--admin-role-mine")
    assert result.code == 0, result.err
    key = "availability-zones:account=111122223333:region=us-west-2"
    assert json.loads(project.with_name("cdk.context.json").read_text()) == {key: REGION_AZS}
    assert key not in json.loads(project.read_text())["context"]
    settings = settings_from_cdk_json(str(project))  # the AZ check passes with the merge
    assert settings.env.account == "111122223333"


def test_account_comes_from_sts(aws_env, project, mlp, monkeypatch):
    from moto import mock_aws

    monkeypatch.setenv("MOTO_ACCOUNT_ID", "111122223333")
    with mock_aws():
        assert mlp("--cdk-json", project, "azs", "--admin-role-mine").code == 0
    assert _written(project)["env"]["account"] == "111122223333"
    written = json.loads(project.with_name("cdk.context.json").read_text())
    assert "availability-zones:account=111122223333:region=us-west-2" in written
    assert settings_from_cdk_json(str(project)).env.account == "111122223333"


def test_other_region(aws, project, mlp):
    result = mlp("--cdk-json", project, "--region", "us-east-1", "azs", "--admin-role-mine")
    assert result.code == 0, result.err
    written = _written(project)
    assert written["env"]["region"] == "us-east-1"
    assert all(az.startswith("us-east-1") for az in written["network"]["availability_zones"])
    assert written["network"]["trainium_az"] in written["network"]["availability_zones"]
    assert settings_from_cdk_json(str(project)).env.region == "us-east-1"


def test_fixes_settings_whose_azs_are_wrong(aws, project, mlp):
    """Broken AZ settings are what the command repairs, so they do not stop it."""
    _customise(
        project,
        network={"availability_zones": ["eu-west-1a", "eu-west-1b"], "trainium_az": "eu-west-1c"},
    )
    result = mlp("--cdk-json", project, "azs", "--admin-role-mine")
    assert result.code == 0, result.err
    network = _written(project)["network"]
    assert network == {
        "availability_zones": ["us-west-2a", "us-west-2b"],
        "trainium_az": "us-west-2b",
    }
    assert settings_from_cdk_json(str(project)).network.trainium_az == "us-west-2b"


def test_result_is_validated_before_writing(aws, project, mlp):
    _customise(
        project, network={"nat_gateways": 3, "availability_zones": ["us-west-2a", "us-west-2d"]}
    )
    result = mlp("--cdk-json", project, "azs", "--admin-role-mine")
    assert result.code == 1
    assert "the settings would be invalid, nothing written" in result.err
    assert "network.nat_gateways = 3: expected 1 to 2" in result.err
    assert not project.with_name("cdk.context.json").exists()


def test_missing_cdk_json(aws, tmp_path, mlp):
    result = mlp("--cdk-json", tmp_path / "nope.json", "azs", "--admin-role-mine")
    assert result.code == 1
    assert "nope.json: no such file" in result.err


@pytest.mark.parametrize(
    ("trainium", "current", "expected"),
    [
        (
            "us-west-2d",
            ["us-west-2a", "us-west-2b", "us-west-2d"],
            ["us-west-2a", "us-west-2b", "us-west-2d"],
        ),
        ("us-west-2b", ["us-west-2a", "us-west-2c"], ["us-west-2a", "us-west-2b"]),
        ("us-west-2d", [], ["us-west-2a", "us-west-2d"]),
        (
            "us-west-2c",
            ["eu-west-1a", "us-west-2d", "us-west-2a", "us-west-2b"],
            ["us-west-2a", "us-west-2c", "us-west-2d"],
        ),
    ],
)
def test_choose_azs(trainium, current, expected):
    assert choose_azs(trainium, current, REGION_AZS) == expected


# --- cluster.admin_role_arn: the caller's role -----------------------------------------------


def _assume(monkeypatch, name: str, path: str) -> str:
    """Create a role in moto, assume it and make its session the caller; returns its ARN."""
    import boto3

    iam = boto3.client("iam", region_name="us-west-2")
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "sts:AssumeRole",
                "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
            }
        ],
    }
    role = iam.create_role(RoleName=name, Path=path, AssumeRolePolicyDocument=json.dumps(trust))
    credentials = boto3.client("sts", region_name="us-west-2").assume_role(
        RoleArn=role["Role"]["Arn"], RoleSessionName="alice@example.com"
    )["Credentials"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", credentials["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", credentials["SecretAccessKey"])
    monkeypatch.setenv("AWS_SESSION_TOKEN", credentials["SessionToken"])
    return role["Role"]["Arn"]


def test_writes_the_callers_role_with_its_path_as_cluster_admin(aws, project, mlp, monkeypatch):
    arn = _assume(
        monkeypatch, "AWSReservedSSO_Admin_0123456789abcdef", "/aws-reserved/sso.amazonaws.com/"
    )
    assert arn == (
        "arn:aws:iam::123456789012:role/aws-reserved/sso.amazonaws.com/"
        "AWSReservedSSO_Admin_0123456789abcdef"
    )
    result = mlp("--cdk-json", project, "azs", "--admin-role-mine")
    assert result.code == 0, result.err
    written = _written(project)
    assert written["cluster"]["admin_role_arn"] == arn
    assert (
        f"cluster admin: {arn} (role of session arn:aws:sts::123456789012:assumed-role/"
        in result.out
    )
    assert settings_from_cdk_json(str(project)).cluster.admin_role_arn == arn


def test_a_role_set_in_cdk_json_or_on_the_command_line_wins(aws, project, mlp, monkeypatch):
    _assume(monkeypatch, "caller", "/")
    _customise(project, cluster={"admin_role_arn": "arn:aws:iam::123456789012:role/platform"})
    assert mlp("--cdk-json", project, "azs").code == 0
    written = _written(project)
    assert written["cluster"]["admin_role_arn"] == "arn:aws:iam::123456789012:role/platform"
    other = "arn:aws:iam::123456789012:role/ops/admins"
    assert mlp("--cdk-json", project, "azs", "--admin-role-arn", other).code == 0
    written = _written(project)
    assert written["cluster"]["admin_role_arn"] == other


def test_get_role_denied_falls_back_to_the_role_arn_without_path(aws_env):
    import boto3
    from botocore.stub import Stubber

    from ml_platform_cli.azs import caller_role_arn

    iam = boto3.client("iam", region_name="us-west-2")
    with Stubber(iam) as stub:
        stub.add_client_error("get_role", "AccessDenied", expected_params={"RoleName": "dev"})
        arn, note = caller_role_arn("arn:aws:sts::111122223333:assumed-role/dev/s", iam)
    assert arn == "arn:aws:iam::111122223333:role/dev"
    assert "iam:GetRole failed (AccessDenied)" in note
    assert caller_role_arn("arn:aws-cn:iam::111122223333:role/x/y", iam) == (
        "arn:aws-cn:iam::111122223333:role/x/y",
        "the caller",
    )
    assert caller_role_arn("arn:aws:iam::111122223333:root", iam)[0] is None


# --- naming the admin role, and the API endpoint ---------------------------------------------


def test_the_admin_role_must_be_named(aws, project, mlp):
    """Without --admin-role-arn or --admin-role-mine (and none configured) nothing is written:
    the caller's role is often an SSO administrator permission set, so making it cluster-admin
    must be a stated choice."""
    result = mlp("--cdk-json", project, "azs")
    assert result.code == 1
    assert result.err.strip() == (
        "mlp: error: name the cluster admin: --admin-role-arn ARN, or --admin-role-mine for the "
        "role of your credentials (arn:aws:sts::123456789012:user/moto); nothing written"
    )
    assert not project.with_name("cdk.context.json").exists()
    # The two ways of naming it exclude each other.
    with pytest.raises(SystemExit):
        mlp(
            "--cdk-json",
            project,
            "azs",
            "--admin-role-mine",
            "--admin-role-arn",
            "arn:aws:iam::123456789012:role/x",
        )


def test_a_rerun_keeps_the_admin_role_an_earlier_run_wrote(aws, project, mlp):
    role = "arn:aws:iam::123456789012:role/ops/admins"
    assert mlp("--cdk-json", project, "azs", "--admin-role-arn", role).code == 0
    result = mlp("--cdk-json", project, "azs", "--az-id", "usw2-az4")
    assert result.code == 0, result.err
    assert f"cluster admin: {role} (cluster.admin_role_arn of cdk.json)" in result.out
    written = _written(project)
    assert written["cluster"]["admin_role_arn"] == role


def test_endpoint_stays_private_without_the_public_options(aws, project, mlp):
    result = mlp("--cdk-json", project, "azs", "--admin-role-mine")
    assert result.code == 0, result.err
    # Node SSM access is off by default (break-glass): the line must not promise Session
    # Manager as the way in, and names the setting that turns it on.
    assert (
        "API endpoint: private (reach it from the VPC, a VPN or a peered network; "
        "--public-access-mine opens it to your address only; break-glass: Session Manager port "
        "forwarding after setting cluster.node_ssm_access: true and deploying; see "
        "docs/security.md#cluster-access)\n"
    ) in result.out
    written = _written(project)
    assert "cluster" not in written
    cluster = settings_from_cdk_json(str(project)).cluster
    assert (cluster.endpoint_access, cluster.public_access_cidrs) == ("private", ())
    assert cluster.node_ssm_access is False


def test_private_endpoint_line_says_session_manager_is_on_when_the_setting_is(aws, project, mlp):
    _customise(project, cluster={"node_ssm_access": True})
    result = mlp("--cdk-json", project, "azs", "--admin-role-mine")
    assert result.code == 0, result.err
    assert (
        "--public-access-mine opens it to your address only; Session Manager port forwarding "
        "through a node: on (cluster.node_ssm_access); see docs/security.md#cluster-access)\n"
    ) in result.out


@pytest.fixture
def checkip(monkeypatch):
    """A local stand-in for checkip.amazonaws.com answering what ``answer`` holds."""
    import http.server
    import threading

    answer = {"body": b"198.51.100.7\n"}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(answer["body"])

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(
        "ml_platform_cli.azs.CHECKIP_URL", f"http://127.0.0.1:{server.server_address[1]}/"
    )
    yield answer
    server.shutdown()
    server.server_close()


def test_public_access_mine_writes_the_callers_address_as_a_slash_32(aws, project, mlp, checkip):
    result = mlp(
        "--cdk-json",
        project,
        "azs",
        "--admin-role-mine",
        "--public-access-mine",
        "--public-access-cidr",
        "203.0.113.0/24",
    )
    assert result.code == 0, result.err
    assert "API endpoint: public to 203.0.113.0/24, 198.51.100.7/32 and private" in result.out
    written = _written(project)
    assert written["cluster"] == {
        "endpoint_access": "public_and_private",
        "public_access_cidrs": ["203.0.113.0/24", "198.51.100.7/32"],
    }
    cluster = settings_from_cdk_json(str(project)).cluster
    assert cluster.public_access_cidrs == ("203.0.113.0/24", "198.51.100.7/32")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<html>oops</html>", "answered '<html>oops</html>', not an address"),
        (b"2001:db8::1\n", "2001:db8::1 is IPv6; EKS takes IPv4 blocks only"),
    ],
)
def test_public_access_mine_refuses_what_is_not_an_ipv4_address(
    aws, project, mlp, checkip, body, message
):
    checkip["body"] = body
    result = mlp("--cdk-json", project, "azs", "--admin-role-mine", "--public-access-mine")
    assert result.code == 1
    assert message in result.err
    assert not project.with_name("cdk.context.json").exists()


def test_a_world_open_cidr_is_refused_before_writing(aws, project, mlp):
    result = mlp(
        "--cdk-json", project, "azs", "--admin-role-mine", "--public-access-cidr", "0.0.0.0/0"
    )
    assert result.code == 1
    assert (
        "cluster.public_access_cidrs[0] = '0.0.0.0/0', cluster.public_access_from_anywhere = "
        "False: opens the Kubernetes API" in result.err
    )
    assert not project.with_name("cdk.context.json").exists()


def test_trn2_is_found_in_us_east_2_and_written_with_its_az(aws, project, mlp):
    """moto's us-east-2 (EC2 DescribeInstanceTypeOfferings as moto 5.2.5 ships it) offers
    trn2.48xlarge in use2-az1, use2-az2 and use2-az3, trn1.32xlarge only in use2-az3."""
    result = mlp(
        "--cdk-json", project, "--region", "us-east-2", "azs", "--admin-role-mine",
        "--instance-type", "trn2.48xlarge", "--az-id", "use2-az2",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert (
        "trn2.48xlarge in us-east-2 (account 123456789012) is offered in: use2-az1 (us-east-2a), "
        "use2-az2 (us-east-2b), use2-az3 (us-east-2c)" in result.out
    )
    written = _written(project)
    assert written["env"]["region"] == "us-east-2"
    assert written["trainium"]["instance_type"] == "trn2.48xlarge"
    assert written["network"]["trainium_az"] == "us-east-2b"
    settings = settings_from_cdk_json(str(project))
    assert settings.trainium.instance_type == "trn2.48xlarge"
    assert settings.network.trainium_az == "us-east-2b"


def test_trn2_from_the_settings_is_looked_up_too(aws, project, mlp):
    _customise(project, trainium={"instance_type": "trn2.48xlarge"})
    result = mlp("--cdk-json", project, "--region", "us-east-2", "azs", "--admin-role-mine")
    assert result.code == 0, result.err
    assert _written(project)["network"]["trainium_az"] == "us-east-2a"  # use2-az1, first id


def test_trn2u_where_no_az_offers_it_is_refused_and_nothing_written(aws, project, mlp):
    """moto offers trn2u.48xlarge in ap-south-2 only."""
    before = project.read_text()
    result = mlp(
        "--cdk-json", project, "azs", "--admin-role-mine", "--instance-type", "trn2u.48xlarge"
    )
    assert result.code == 1
    assert result.err.strip() == (
        "mlp: error: trn2u.48xlarge is not offered in any available AZ of us-west-2"
    )
    assert project.read_text() == before
    result = mlp(
        "--cdk-json", project, "--region", "ap-south-2", "azs", "--admin-role-mine",
        "--instance-type", "trn2u.48xlarge",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert "aps2-az1 (ap-south-2a), aps2-az2 (ap-south-2b), aps2-az3 (ap-south-2c)" in result.out
    assert settings_from_cdk_json(str(project)).trainium.instance_type == "trn2u.48xlarge"
