"""Every input listed in issue #13 point 1 is one SettingsError naming the key (no traceback,
no jsii error, nothing harmful accepted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ml_platform.config import Settings, SettingsError, settings_from_cdk_json
from ml_platform.limits import RESERVED_NAMESPACES
from ml_platform.triton.archive_names import content_version
from tests.support import ROOT, cdk_json_context

AZ_KEY = "availability-zones:account=123456789012:region=us-west-2"
SEEDED = {AZ_KEY: ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"]}


def problems(values: object) -> list[str]:
    with pytest.raises(SettingsError) as info:
        Settings.from_context(values, known_azs=SEEDED)
    return info.value.problems


def one_problem(values: object, *expected: str) -> str:
    found = problems(values)
    assert len(found) == 1, found
    for text in expected:
        assert text in found[0], found
    return found[0]


# -- tracebacks of today ---------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["x", "[1, 2]", "{", "1", '"text"'])
def test_context_text_that_is_not_a_json_object_is_a_settings_error(raw: str) -> None:
    one_problem(raw, f"ml-platform = {raw!r}")


def test_app_py_reports_a_non_object_context_without_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """app.py's main() in-process, its app given cdk.json's context with ``ml-platform`` text
    (the jsii kernel is already running, so CDK_CONTEXT_JSON would not reach it)."""
    import runpy

    import ml_platform.app

    context = cdk_json_context()
    context["ml-platform"] = "x"
    real = ml_platform.app.new_app
    monkeypatch.setattr(
        ml_platform.app, "new_app", lambda: real(context=context, outdir=str(tmp_path))
    )
    with pytest.raises(SystemExit) as info:
        runpy.run_path(str(ROOT / "app.py"), run_name="__main__")
    assert info.value.code == 1
    assert "ml-platform = 'x': not valid JSON" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.template.json"))


def test_public_endpoint_without_cidrs_is_a_settings_error() -> None:
    one_problem(
        {"cluster": {"endpoint_access": "public_and_private"}}, "cluster.public_access_cidrs = []"
    )
    Settings.from_context(
        {"cluster": {"public_access_cidrs": [], "endpoint_access": "private"}}, known_azs=SEEDED
    )


def test_the_endpoint_is_private_by_default() -> None:
    cluster = Settings.from_context({}, known_azs=SEEDED).cluster
    assert (cluster.endpoint_access, cluster.public_access_cidrs) == ("private", ())
    one_problem(
        {"cluster": {"public_access_cidrs": ["203.0.113.0/24"]}},
        "cluster.public_access_cidrs = ['203.0.113.0/24'], cluster.endpoint_access = 'private': "
        "a private endpoint takes none (make it 'public_and_private' to use them)",
    )


def test_a_world_open_endpoint_needs_a_setting_that_states_it() -> None:
    public = {"endpoint_access": "public_and_private", "public_access_cidrs": ["0.0.0.0/0"]}
    one_problem(
        {"cluster": public},
        "cluster.public_access_cidrs[0] = '0.0.0.0/0', cluster.public_access_from_anywhere = "
        "False: opens the Kubernetes API to the whole internet; name your networks (`mlp azs "
        "--public-access-mine` writes your address), keep the endpoint 'private', or set "
        "public_access_from_anywhere to true to state that choice",
    )
    stated = Settings.from_context(
        {"cluster": {**public, "public_access_from_anywhere": True}}, known_azs=SEEDED
    )
    assert stated.cluster.public_access_cidrs == ("0.0.0.0/0",)


@pytest.mark.parametrize("namespace", RESERVED_NAMESPACES)
def test_training_namespace_may_not_be_one_the_platform_or_kubernetes_owns(namespace: str) -> None:
    one_problem({"training": {"namespace": namespace}}, f"training.namespace = {namespace!r}")


def test_reserved_namespaces_cover_every_namespace_the_cluster_charts_use(settings) -> None:
    """Namespaces the charts create or write into besides training.namespace are reserved."""
    import cdk8s

    from ml_platform.k8s_charts.triton import TritonChartProps
    from ml_platform.stacks.training_cluster import cluster_charts
    from ml_platform.versions import VOLCANO_NAMESPACE

    charts = cluster_charts(
        cdk8s.App(),
        settings,
        file_system_id="fs-0",
        file_system_dns_name="d",
        file_system_mount_name="m",
    )
    used = {
        o.get("metadata", {}).get("namespace")
        or (o["metadata"]["name"] if o["kind"] == "Namespace" else None)
        for chart in charts.values()
        for o in chart.to_json()
    } - {None, settings.training.namespace}
    used |= {VOLCANO_NAMESPACE, TritonChartProps.namespace}
    assert used <= set(RESERVED_NAMESPACES), used - set(RESERVED_NAMESPACES)


@pytest.mark.parametrize(
    ("upload_dir", "expected"),
    [
        ("does/not/exist", "does not exist"),
        ("README.md", "is not a directory"),
        ("a\x00b", "does not exist"),
    ],
)
def test_upload_dir_that_is_not_a_folder_is_a_settings_error(
    upload_dir: str, expected: str
) -> None:
    path = str(ROOT / upload_dir) if "\x00" not in upload_dir else upload_dir
    one_problem({"inference": {"upload_dir": path}}, "inference.upload_dir = ", expected)


def test_upload_dir_with_a_corrupt_or_unsafe_archive_is_a_settings_error(tmp_path: Path) -> None:
    import io
    import tarfile

    (tmp_path / "corrupt.tar.gz").write_bytes(b"\x1f\x8b not really")
    with tarfile.open(tmp_path / "escape.tar.gz", "w:gz") as tar:
        link = tarfile.TarInfo("ens/passwd")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
        data = b'name: "ens"\nplatform: "ensemble"\n'
        info = tarfile.TarInfo("ens/config.pbtxt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    found = problems({"inference": {"upload_dir": str(tmp_path)}})
    assert all(p.startswith(f"inference.upload_dir = {str(tmp_path)!r}") for p in found), found
    assert any("corrupt.tar.gz" in p and "not a readable tar archive" in p for p in found)
    assert any("member 'ens/passwd': is a symbolic link" in p for p in found)


def test_upload_dir_without_archives_is_a_settings_error(tmp_path: Path) -> None:
    one_problem({"inference": {"upload_dir": str(tmp_path)}}, "holds no *.tar.gz archive")


# -- jsii errors of today --------------------------------------------------------------------


@pytest.mark.parametrize(
    "instance_type", ["foo.bar", "m6i.large\n", "m6i", "M6I.LARGE", "m7g.large"]
)
def test_system_instance_type_aws_cdk_cannot_parse_or_run_is_a_settings_error(
    instance_type: str,
) -> None:
    one_problem(
        {"cluster": {"system_instance_type": instance_type}},
        f"cluster.system_instance_type = {instance_type!r}",
    )


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["triton-ensembles", "tritonEnsembles"], "too alike"),
        (["triton-ensembles", "triton--ensembles"], "too alike"),
        (["a", "a-name"], "too alike"),  # endpoint 'a-name' vs the name output of endpoint 'a'
        (["endpoints-dashboard"], "keeps for its own 'endpoints-dashboard'"),  # its dashboard
        (["endpoints-dashboard-url"], "keeps for its own 'endpoints-dashboard-url'"),  # URL output
        (["model-bucket"], "keeps for its own 'model-bucket'"),  # the stack's imported bucket
        (["upload-archives"], "keeps for its own 'upload-archives'"),
    ],
)
def test_endpoint_names_mapping_to_one_construct_id_are_a_settings_error(
    names: list[str], expected: str
) -> None:
    endpoints = [{"name": n} for n in names]
    found = problems({"inference": {"endpoints": endpoints}})
    clashes = [p for p in found if expected in p]
    assert len(clashes) == 1, found
    assert all(f"inference.endpoints[{i}].name = {n!r}" in clashes[0] for i, n in enumerate(names))
    # Issue 22 point 5: the message speaks of names, not of internal construct ids.
    for cid in ("TritonEnsembles", "AName", "ModelBucket", "UploadArchives", "construct id"):
        assert cid not in clashes[0], clashes[0]


def test_endpoint_names_differing_only_in_case_are_a_settings_error() -> None:
    found = problems({"inference": {"endpoints": [{"name": "Triton"}, {"name": "triton"}]}})
    assert any("case-insensitive" in p for p in found), found


# -- accepted today though invalid or harmful ------------------------------------------------


def test_null_means_default_through_every_source(tmp_path: Path) -> None:
    """cdk.json (jsii drops nulls), ``-c`` JSON text and the CLI's own reading of cdk.json
    all treat ``null`` as "not set"."""
    nulls = {"network": {"cidr": None}, "cluster": {"admin_role_arn": None}, "storage": None}
    defaults = Settings.from_context({}, known_azs=SEEDED)
    assert Settings.from_context(nulls, known_azs=SEEDED) == defaults
    assert Settings.from_context(json.dumps(nulls), known_azs=SEEDED) == defaults
    context = {"ml-platform": nulls, **SEEDED}
    (tmp_path / "cdk.json").write_text(json.dumps({"context": context}))
    assert settings_from_cdk_json(str(tmp_path / "cdk.json")) == defaults

    from ml_platform.app import new_app, settings_from_app

    assert settings_from_app(new_app(context=context)) == defaults


def test_null_inside_a_list_is_an_error_naming_the_item() -> None:
    one_problem(
        {"network": {"availability_zones": ["us-west-2a", None]}}, "network.availability_zones[1]"
    )


def test_no_endpoints_with_inference_on_is_a_settings_error() -> None:
    one_problem({"inference": {"endpoints": []}}, "inference.endpoints = []", "features.inference")
    Settings.from_context(
        {"inference": {"endpoints": []}, "features": {"inference": False}}, known_azs=SEEDED
    )


@pytest.mark.parametrize(
    "cidr",
    [
        "224.0.0.0/16",
        "239.1.0.0/16",
        "127.0.0.0/16",
        "0.0.0.0/16",
        "169.254.0.0/16",
        "240.0.0.0/16",
        "10.0.0.1/16",
        "fd00::/56",
        "10.0.0.0/16\n",
    ],
)
def test_vpc_cidrs_a_vpc_cannot_use_are_settings_errors(cidr: str) -> None:
    one_problem({"network": {"cidr": cidr}}, f"network.cidr = {cidr!r}")


@pytest.mark.parametrize(
    "prefix", ["models/../", "./models/", "models//", "/", "", "a/./b/", "models"]
)
def test_model_prefix_with_dot_dotdot_or_empty_segments_is_a_settings_error(prefix: str) -> None:
    one_problem({"storage": {"model_prefix": prefix}}, f"storage.model_prefix = {prefix!r}")


def test_admin_role_of_another_partition_is_a_settings_error() -> None:
    one_problem(
        {"cluster": {"admin_role_arn": "arn:aws-cn:iam::123456789012:role/Admin"}},
        "cluster.admin_role_arn",
        "partition 'aws-cn'",
    )
    Settings.from_context(
        {"cluster": {"admin_role_arn": "arn:aws:iam::210987654321:role/team/Admin"}},
        known_azs=SEEDED,
    )


@pytest.mark.parametrize("cidr", ["::/0", "2001:db8::/32"])
def test_ipv6_public_access_cidrs_are_settings_errors(cidr: str) -> None:
    one_problem(
        {"cluster": {"public_access_cidrs": [cidr], "endpoint_access": "public_and_private"}},
        f"cluster.public_access_cidrs[0] = {cidr!r}",
        "IPv4",
    )


def test_duplicate_archives_in_one_endpoint_are_a_settings_error() -> None:
    one_problem(
        {"inference": {"endpoints": [{"archives": ["a", "a"]}]}},
        "inference.endpoints[0].archives",
        "more than once",
    )


@pytest.mark.parametrize("queue", ["default", "root"])
def test_volcano_own_queues_are_settings_errors(queue: str) -> None:
    one_problem({"training": {"queue": queue}}, f"training.queue = {queue!r}")


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"env": {"account": "123456789012\n"}}, "env.account"),
        ({"env": {"account": "١٢٣٤٥٦٧٨٩٠١٢"}}, "env.account"),  # Arabic-Indic digits match \d
        ({"cluster": {"name": "ml-platform\n"}}, "cluster.name"),
        ({"env": {"stack_prefix": "MlPlatform\n"}}, "env.stack_prefix"),
        ({"training": {"image_tag": "v1\n"}}, "training.image_tag"),
    ],
)
def test_trailing_newlines_and_non_ascii_digits_are_refused(values: dict, key: str) -> None:
    assert any(p.startswith(f"{key} = ") for p in problems(values))


# -- the operator CLI's reading of cdk.json --------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("cdk.json", b"[]", "expected a JSON object, got list"),
        ("cdk.json", b'{"context": 5}', "'context' must be a JSON object"),
        ("cdk.json", b"{", "not valid JSON"),
        ("cdk.json", b"\xff\xfe{}", "not UTF-8"),
        ("cdk.context.json", b'"x"', "expected a JSON object, got str"),
    ],
)
def test_cdk_json_files_that_are_not_json_objects_are_one_line_errors(
    tmp_path: Path, name: str, content: bytes, expected: str
) -> None:
    (tmp_path / "cdk.json").write_text(json.dumps({"context": SEEDED}))
    (tmp_path / name).write_bytes(content)
    with pytest.raises(SettingsError) as info:
        settings_from_cdk_json(str(tmp_path / "cdk.json"))
    assert info.value.problems == [f"{tmp_path / name}: {expected}"] or expected in str(info.value)
    assert str(tmp_path / name) in str(info.value)


# -- issue 22 point 5: unknown regions, a bad triton_version once ----------------------------
@pytest.mark.parametrize("region", ["us-foo-1", "eu-west-9", "us-gov-north-7"])
def test_an_unknown_region_is_refused_once(region: str) -> None:
    found = one_problem({"env": {"region": region}}, f"env.region = {region!r}: not an AWS region")
    assert "'us-west-2'" in found


def test_a_known_region_of_another_partition_is_accepted() -> None:
    found = problems({"env": {"region": "cn-north-1"}, "network": {"availability_zones": ["x"]}})
    assert not any(p.startswith("env.region = 'cn-north-1': not an AWS region") for p in found)


def test_a_bad_triton_version_is_reported_once() -> None:
    found = one_problem(
        {"inference": {"triton_version": "99.1"}, "features": {"triton_on_eks": True}},
        "inference.triton_version = '99.1': expected one of",
    )
    assert found.count("99.1") == 1


# -- issue 20: upload_dir takes the names and content versions that `mlp models upload` takes --
def test_upload_dir_refuses_unversioned_names_and_versions_that_are_not_the_content(
    tmp_path: Path,
) -> None:
    from ml_platform_cli.archives import version_archive
    from tests.helpers.cli import ENSEMBLE, MODEL, write_tar

    files = {"ensemble/config.pbtxt": ENSEMBLE, "encoder/config.pbtxt": MODEL}
    good = version_archive(write_tar(tmp_path / "model_good.tar.gz", files))[0]
    write_tar(tmp_path / "model_tf_dali.tar.gz", files)
    write_tar(tmp_path / "model_tf_dali-v00000000.tar.gz", files)
    found = problems({"inference": {"upload_dir": str(tmp_path)}})
    where = f"inference.upload_dir = {str(tmp_path)!r}"
    actual = content_version(tmp_path / "model_tf_dali-v00000000.tar.gz")
    assert found == [
        f"{where}: model_tf_dali-v00000000.tar.gz: named version v00000000, but its content is "
        f"version {actual} (repackage it with mlp models package)",
        f"{where}: model_tf_dali.tar.gz: not a versioned archive name: expected "
        "<logical>-v<8 hex digits>.tar.gz, as `mlp models package` names it",
    ]
    assert good.name not in " ".join(found)


def test_upload_dir_with_a_file_that_is_not_gzip_gives_one_line(tmp_path: Path) -> None:
    (tmp_path / "model_x-v00000000.tar.gz").write_text("hello\n")
    found = problems({"inference": {"upload_dir": str(tmp_path)}})
    unreadable = [p for p in found if "not a readable tar archive" in p]
    assert unreadable == [
        f"inference.upload_dir = {str(tmp_path)!r}: {tmp_path}/model_x-v00000000.tar.gz: not a "
        "readable tar archive (not gzip-compressed: a .tar.gz archive starts with the gzip "
        "bytes 1f 8b)"
    ]
    assert all("\n" not in p for p in found)


def test_network_policy_mode_is_strict_by_default_and_checked() -> None:
    assert Settings.from_context({}, known_azs=SEEDED).cluster.network_policy_mode == "strict"
    one_problem(
        {"cluster": {"network_policy_mode": "off"}},
        "cluster.network_policy_mode = 'off': expected one of ['strict', 'standard']",
    )
