"""``mlp addons`` against EKS DescribeAddonVersions answers stubbed with botocore's Stubber."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber

from ml_platform.config import CONTEXT_KEY, deep_merge
from ml_platform.versions import EKS_ADDON_VERSIONS
from ml_platform_cli.aws import Context

PINS = EKS_ADDON_VERSIONS["1.35"]


def _answer(name: str, versions: list[str], default: str | None) -> dict:
    """A DescribeAddonVersions page as EKS shapes it (compatibilities per cluster version)."""
    return {
        "addons": [
            {
                "addonName": name,
                "type": "networking",
                "addonVersions": [
                    {
                        "addonVersion": v,
                        "architecture": ["amd64", "arm64"],
                        "compatibilities": [
                            {
                                "clusterVersion": "1.35",
                                "platformVersions": ["*"],
                                "defaultVersion": v == default,
                            },
                            {
                                "clusterVersion": "1.34",
                                "platformVersions": ["*"],
                                "defaultVersion": False,
                            },
                        ],
                    }
                    for v in versions
                ],
            }
        ]
    }


def _eks_offers() -> dict[str, tuple[list[str], str]]:
    """What the stubbed EKS has per add-on: versions (not sorted) and the default."""
    return {
        "amazon-cloudwatch-observability": (
            ["v4.10.1-eksbuild.1", "v5.10.0-eksbuild.1", "v5.9.2-eksbuild.1"],
            "v5.9.2-eksbuild.1",
        ),
        "aws-fsx-csi-driver": (["v1.8.0-eksbuild.2", "v1.10.0-eksbuild.1"], "v1.8.0-eksbuild.2"),
        "coredns": ([PINS["coredns"], "v1.14.4-eksbuild.1"], PINS["coredns"]),
        "eks-node-monitoring-agent": (
            [PINS["eks-node-monitoring-agent"]],
            PINS["eks-node-monitoring-agent"],
        ),
        "eks-pod-identity-agent": (
            [PINS["eks-pod-identity-agent"]],
            PINS["eks-pod-identity-agent"],
        ),
        "kube-proxy": (["v1.35.0-eksbuild.2", PINS["kube-proxy"]], "v1.35.0-eksbuild.2"),
        "vpc-cni": ([PINS["vpc-cni"], "v1.21.2-eksbuild.1"], PINS["vpc-cni"]),
    }


@pytest.fixture
def eks(aws_env, monkeypatch):
    """An EKS client whose answers come from a Stubber; every mlp client is this one."""
    client = boto3.client("eks", region_name="us-west-2")
    stubber = Stubber(client)
    monkeypatch.setattr(Context, "client", lambda self, service, region=None, **kw: client)
    with stubber:
        yield stubber
    stubber.assert_no_pending_responses()


def _expect(stubber: Stubber, offers: dict[str, tuple[list[str], str]]) -> None:
    for name in sorted(offers):
        versions, default = offers[name]
        stubber.add_response(
            "describe_addon_versions",
            _answer(name, versions, default),
            {"addonName": name, "kubernetesVersion": "1.35"},
        )


def test_reports_pins_defaults_and_latest_as_json(eks, project, mlp):
    _expect(eks, _eks_offers())
    result = mlp("--cdk-json", project, "addons", "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["kubernetes_version"] == "1.35" and report["region"] == "us-west-2"
    by_name = {a["name"]: a for a in report["addons"]}
    assert by_name["kube-proxy"] == {
        "name": "kube-proxy",
        "requested": PINS["kube-proxy"],
        "requested_exists": True,
        "default": "v1.35.0-eksbuild.2",
        "latest": PINS["kube-proxy"],
        "versions": 2,
    }
    # Not pinned: EKS's default is what gets installed; latest compares versions numerically.
    assert by_name["amazon-cloudwatch-observability"] == {
        "name": "amazon-cloudwatch-observability",
        "requested": None,
        "requested_exists": None,
        "default": "v5.9.2-eksbuild.1",
        "latest": "v5.10.0-eksbuild.1",
        "versions": 3,
    }
    assert by_name["aws-fsx-csi-driver"]["latest"] == "v1.10.0-eksbuild.1"
    assert by_name["vpc-cni"]["latest"] == "v1.21.2-eksbuild.1"
    assert all(a["requested_exists"] in (True, None) for a in report["addons"])


def test_a_pin_eks_does_not_have_fails_with_what_exists(eks, project, mlp):
    offers = _eks_offers()
    offers["coredns"] = (["v1.14.4-eksbuild.1", "v1.13.2-eksbuild.11"], "v1.13.2-eksbuild.11")
    _expect(eks, offers)
    result = mlp("--cdk-json", project, "addons")
    assert result.code == 1
    assert (
        f"coredns: {PINS['coredns']} does not exist for Kubernetes 1.35 in us-west-2; "
        "default v1.13.2-eksbuild.11, latest v1.14.4-eksbuild.1"
    ) in result.out
    assert "(EKS default)" in result.out  # the unpinned add-ons in the table


def test_a_version_set_in_the_settings_is_checked(eks, project, mlp):
    data = json.loads(project.read_text())
    data["context"][CONTEXT_KEY] = deep_merge(
        data["context"][CONTEXT_KEY], {"cluster": {"fsx_csi_driver_version": "v1.9.0-eksbuild.1"}}
    )
    project.write_text(json.dumps(data))
    _expect(eks, _eks_offers())
    result = mlp("--cdk-json", project, "addons", "--json")
    assert result.code == 1
    fsx = {a["name"]: a for a in json.loads(result.out)["addons"]}["aws-fsx-csi-driver"]
    assert fsx["requested"] == "v1.9.0-eksbuild.1" and fsx["requested_exists"] is False


def test_unknown_kubernetes_version(aws_env, project, mlp):
    result = mlp("--cdk-json", project, "addons", "--kubernetes-version", "1.29")
    assert result.code == 1
    assert "Kubernetes 1.29: add-on versions are pinned for ['1.34', '1.35']" in result.err
