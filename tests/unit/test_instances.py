"""Every Trainium row of ml_platform.instances against EC2's DescribeInstanceTypes data (as
moto 5.2.5 ships it) and, for what EC2 does not describe, against the Neuron documentation."""

from __future__ import annotations

from typing import Any

import pytest

from ml_platform.instances import TRAINIUM_INSTANCES, TrainiumInstance
from tests.helpers.ec2_types import describe_instance_types

# What the Neuron docs say per chip generation (EC2's NeuronInfo names the chip):
# - compiler target: neuronx-cc `--target <instance_family>`, valid values inf2, trn1, trn1n,
#   trn2 (aws-neuron/aws-neuron-sdk@81ce03ae:compiler/neuronx-cc/api-reference-guide/index.rst);
#   Trainium (NeuronCore-v2) compiles for trn1, Trainium2 for trn2 (release-notes/components/
#   compiler.rst, Neuron 2.21.0: "--target=trn2 ... for a trn2 instance family").
# - LNC: "LNC can only be set to 1 or 2 ... On Trn2 ... LNC=2 (default) ... LNC applies only to
#   Trn2 and Trn3 instances" (about-neuron/arch/neuron-features/logical-neuroncore-config.rst,
#   same commit), so Trainium's cores are their own logical cores (1).
BY_CHIP: dict[str, tuple[str, int]] = {"Trainium": ("trn1", 1), "Trainium2": ("trn2", 2)}
# "A Trn2 UltraServer comprises four trn2u.48xlarge instances ... a total of 64 Trainium2 chips"
# (about-neuron/arch/neuron-hardware/trn2-arch.rst, same commit).
ULTRASERVER = {"trn2u.48xlarge": (4, 64)}


@pytest.fixture(scope="module")
def ec2() -> dict[str, dict[str, Any]]:
    return describe_instance_types(TRAINIUM_INSTANCES)


def _neuron(entry: dict[str, Any]) -> dict[str, Any] | None:
    info = entry.get("NeuronInfo")
    if info is None:
        return None
    (devices,) = info["NeuronDevices"]  # one kind of chip per instance
    return dict(devices)


@pytest.mark.parametrize("name", sorted(TRAINIUM_INSTANCES))
def test_row_matches_ec2_describe_instance_types(name: str, ec2: dict[str, dict[str, Any]]) -> None:
    row, entry = TRAINIUM_INSTANCES[name], ec2[name]
    assert row.name == name
    assert row.vcpus == entry["VCpuInfo"]["DefaultVCpus"]
    assert row.memory_gib * 1024 == entry["MemoryInfo"]["SizeInMiB"]
    network = entry["NetworkInfo"]
    # One EFA interface per network card, and EC2 allows exactly that many EFA interfaces.
    assert row.efa_interfaces == network["MaximumNetworkCards"] == len(network["NetworkCards"])
    assert row.efa_interfaces == network["EfaInfo"]["MaximumEfaInterfaces"]
    assert network["EfaSupported"] is True


@pytest.mark.parametrize("name", sorted(TRAINIUM_INSTANCES))
def test_chips_cores_lnc_and_target_follow_the_chip(
    name: str, ec2: dict[str, dict[str, Any]]
) -> None:
    row = TRAINIUM_INSTANCES[name]
    devices = _neuron(ec2[name])
    if devices is None:
        # EC2 gives trn2u.48xlarge no NeuronInfo; Neuron's trn2-arch page gives trn2.48xlarge
        # and trn2u.48xlarge the same 16 Trainium2 chips, so read trn2.48xlarge's.
        assert name == "trn2u.48xlarge"
        devices = _neuron(ec2["trn2.48xlarge"])
    assert devices is not None
    assert row.neuron_devices == devices["Count"]
    assert row.physical_cores_per_device == devices["CoreInfo"]["Count"]
    assert (row.compiler_target, row.lnc_default) == BY_CHIP[devices["Name"]]
    assert row.physical_neuron_cores == row.neuron_devices * row.physical_cores_per_device
    # One training worker per logical core: the physical cores in groups of lnc_default.
    assert row.neuron_cores * row.lnc_default == row.physical_neuron_cores


@pytest.mark.parametrize("name", sorted(TRAINIUM_INSTANCES))
def test_ultraserver_size(name: str) -> None:
    row = TRAINIUM_INSTANCES[name]
    instances, chips = ULTRASERVER.get(name, (1, row.neuron_devices))
    assert row.ultraserver_instances == instances
    assert row.ultraserver_instances * row.neuron_devices == chips


def test_trn2u_is_trn2_sold_as_an_ultraserver(ec2: dict[str, dict[str, Any]]) -> None:
    """Same instance, same row but for the UltraServer size; EC2 describes the same host."""
    trn2, trn2u = TRAINIUM_INSTANCES["trn2.48xlarge"], TRAINIUM_INSTANCES["trn2u.48xlarge"]
    assert trn2u == TrainiumInstance(
        **{**vars(trn2), "name": "trn2u.48xlarge", "ultraserver_instances": 4}
    )
    for key in ("VCpuInfo", "MemoryInfo", "NetworkInfo"):
        assert ec2["trn2u.48xlarge"][key] == ec2["trn2.48xlarge"][key], key


def test_the_rows_the_platform_documents() -> None:
    """The figures the docs and the job sizing quote (trn1: 32 workers, trn2: 64 at LNC=2 of
    128 physical cores)."""
    got = {
        n: (r.neuron_devices, r.neuron_cores, r.physical_neuron_cores, r.efa_interfaces)
        for n, r in TRAINIUM_INSTANCES.items()
    }
    assert got == {
        "trn1.32xlarge": (16, 32, 32, 8),
        "trn1n.32xlarge": (16, 32, 32, 16),
        "trn2.48xlarge": (16, 64, 128, 16),
        "trn2u.48xlarge": (16, 64, 128, 16),
    }
