"""The TorchX component as the ``torchx`` CLI sees it."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from torchx.specs import AppDef, RetryPolicy, VolumeMount
from torchx.specs.builders import materialize_appdef
from torchx.specs.file_linter import validate
from torchx.specs.finder import get_component
from torchx.specs.overlays import get_overlay

import ml_platform.training.component as component_module
from ml_platform.instances import TRAINIUM_INSTANCES
from ml_platform.training.component import MEMLOCK_CHECK, node_headroom, trainium_ddp

COMPONENT_FILE = str(Path(component_module.__file__))
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/ml-platform/training:v1"


def command(role) -> list[str]:
    """The launcher's command line as bash will split it: the ``exec`` statement that ends
    ``bash -c <line>``, after the locked-memory check, the NEURON_RT_ROOT_COMM_ID export (and
    the resume check)."""
    assert role.entrypoint == "bash" and role.args[0] == "-c" and len(role.args) == 2
    prologue, launch = role.args[1].rsplit("; exec ", 1)
    assert prologue.startswith(MEMLOCK_CHECK + "; ")
    assert prologue.removeprefix(MEMLOCK_CHECK + "; ").split("; ")[0] == (
        "export NEURON_RT_ROOT_COMM_ID=$${VC_WORKER_0_HOSTS:-localhost}:48620"
    )
    return shlex.split(launch)


def test_passes_torchx_component_linter():
    assert validate(COMPONENT_FILE, "trainium_ddp") == []


@pytest.mark.parametrize(
    "address",
    [
        "ml_platform/training/component.py:trainium_ddp",
        "ml_platform.training.component:trainium_ddp",
    ],
)
def test_cli_addresses_resolve(address, monkeypatch):
    monkeypatch.chdir(Path(COMPONENT_FILE).parents[2])  # repository root, as in the README
    assert get_component(address).fn_name == "trainium_ddp"


def test_cli_arguments_build_the_app():
    app = materialize_appdef(
        trainium_ddp,
        [
            "--name", "bert-pretrain", "--image", IMAGE, "--script", "train.py",
            "--nproc_per_node", "16", "--",
            "--batch_size", "16", "--output_dir", "/data/output",
        ],
    )  # fmt: skip
    (role,) = app.roles
    argv = command(role)
    assert argv[:3] == ["python3", "-m", "torch.distributed.run"]
    assert argv[argv.index("--nproc_per_node") + 1] == "16"
    assert argv[-5:] == ["train.py", "--batch_size", "16", "--output_dir", "/data/output"]


def test_defaults_use_every_neuroncore_and_retry_the_whole_job():
    app = trainium_ddp(script="train.py", image=IMAGE)
    assert isinstance(app, AppDef)
    (role,) = app.roles
    argv = command(role)
    assert argv[argv.index("--nproc_per_node") + 1] == "32"
    assert argv[argv.index("--nnodes") + 1] == "2"
    assert role.num_replicas == 2
    assert role.max_retries == 3
    assert role.retry_policy == RetryPolicy.APPLICATION
    assert role.mounts == [VolumeMount(src="fsx-claim", dst_path="/data")]
    assert role.resource.devices == {"aws.amazon.com/neuron": 16, "vpc.amazonaws.com/efa": 8}
    assert role.resource.capabilities == {"node.kubernetes.io/instance-type": "trn1.32xlarge"}
    assert get_overlay(role, "kubernetes", "V1Pod") == {
        "spec": {
            "tolerations": [
                {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "securityContext": {
                "sysctls": [{"name": "net.ipv4.ip_local_reserved_ports", "value": "48620"}]
            },
            "automountServiceAccountToken": False,
        }
    }
    assert role.port_map == {"c10d": 29500}


def test_script_arguments_stay_separate_items():
    app = trainium_ddp(
        "--data_dir", "/data/with space", "--steps_this_run", "10",
        script="train.py", image=IMAGE, precompile=True,
    )  # fmt: skip
    (role,) = app.roles
    argv = command(role)
    assert argv[:4] == ["neuron_parallel_compile", "python3", "-m", "torch.distributed.run"]
    assert argv[-5:] == [
        "train.py", "--data_dir", "/data/with space", "--steps_this_run", "10",
    ]  # fmt: skip
    # torchrun's --role only names the workers in its logs; an empty one is not needed.
    assert "--role" not in argv


def test_bf16_is_left_to_the_script():
    # XLA_DOWNCAST_BF16 is unsupported since Neuron 2.24, and the BERT sample skips its own
    # model.to(torch.bfloat16) when it is set (training would run in FP32).
    (role,) = trainium_ddp(script="train.py", image=IMAGE).roles
    assert not {"XLA_DOWNCAST_BF16", "XLA_USE_BF16"} & set(role.env)
    with pytest.raises(TypeError):
        trainium_ddp(script="train.py", image=IMAGE, bf16=True)  # type: ignore[call-arg]


def test_rdzv_port_is_checked():
    with pytest.raises(ValueError, match=r"rdzv_port = 48620: expected 1024 to 65535, not the"):
        trainium_ddp(script="train.py", image=IMAGE, rdzv_port=48620)
    with pytest.raises(ValueError, match=r"rdzv_port = 80"):
        trainium_ddp(script="train.py", image=IMAGE, rdzv_port=80)


def test_trn1n_uses_sixteen_efa_interfaces():
    (role,) = trainium_ddp(script="t.py", image=IMAGE, instance_type="trn1n.32xlarge").roles
    assert role.resource.devices["vpc.amazonaws.com/efa"] == 16


# --- Trn2: workers, compiler target and LNC, pod size, all from the instance row ------------


@pytest.mark.parametrize("instance_type", ["trn2.48xlarge", "trn2u.48xlarge"])
def test_trn2_runs_one_worker_per_logical_neuroncore_with_its_target_and_lnc(instance_type):
    (role,) = trainium_ddp(script="t.py", image=IMAGE, instance_type=instance_type).roles
    argv = command(role)
    # 16 chips x 8 physical cores, grouped in pairs at Trn2's default LNC=2: 64 workers.
    assert argv[argv.index("--nproc_per_node") + 1] == "64"
    assert role.env["NEURON_LOGICAL_NC_CONFIG"] == "2"
    assert role.env["NEURON_CC_FLAGS"] == (
        "--cache_dir=/data/neuron_cache/default_${replica_id} --target=trn2 --logical-nc-config=2"
    )
    assert role.resource.devices == {"aws.amazon.com/neuron": 16, "vpc.amazonaws.com/efa": 16}
    assert role.resource.capabilities == {"node.kubernetes.io/instance-type": instance_type}
    # 192 vCPUs and 2048 GiB less 1/16 each.
    assert (role.resource.cpu, role.resource.memMB) == (180, 1920 * 1024)


@pytest.mark.parametrize("instance_type", ["trn1.32xlarge", "trn1n.32xlarge"])
def test_trn1_gets_no_compiler_setting_and_its_old_headroom(instance_type):
    """Trn1 is the compiler's and runtime's default: its pods are as they were."""
    (role,) = trainium_ddp(script="t.py", image=IMAGE, instance_type=instance_type).roles
    assert "NEURON_LOGICAL_NC_CONFIG" not in role.env
    assert role.env["NEURON_CC_FLAGS"] == "--cache_dir=/data/neuron_cache/default_${replica_id}"
    assert (role.resource.cpu, role.resource.memMB) == (128 - 8, (512 - 32) * 1024)


def test_trn2_workers_are_bounded_by_its_logical_neuroncores():
    with pytest.raises(ValueError, match=r"nproc_per_node = 65: expected 1 to 64 \(NeuronCores"):
        trainium_ddp(script="t.py", image=IMAGE, instance_type="trn2.48xlarge", nproc_per_node=65)


def _kube_reserved(vcpus: int, max_pods: int) -> tuple[float, float]:
    """vCPUs and GiB the AL2023 node reserves for the kubelet and the eviction threshold, by
    nodeadm's rule (awslabs/amazon-eks-ami@v20260505:nodeadm/internal/kubelet/config.go:
    getCPUMillicoresToReserve, getMemoryMebibytesToReserve, evictionHard memory.available)."""
    millicores = vcpus * 1000
    bands = [(0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, millicores, 25)]
    cpu_m = sum(
        (min(millicores, hi) - lo) * pct // 10000 for lo, hi, pct in bands if millicores > lo
    )
    return cpu_m / 1000, (11 * max_pods + 255 + 100) / 1024


# maxPods = default ENIs x (IPv4 per ENI - 1) + 2, from the same release's instance-info.jsonl
# (trn1.32xlarge and trn1n.32xlarge 5 x 50, trn2.48xlarge 2 x 50). trn2u.48xlarge is not listed
# there (nor at v20260724): nodeadm asks EC2, or falls back to the kubelet's 110
# (eni_max_pods.go, defaultMaxPods); 110 is taken, the larger.
MAX_PODS = {
    "trn1.32xlarge": 247,
    "trn1n.32xlarge": 247,
    "trn2.48xlarge": 100,
    "trn2u.48xlarge": 110,
}


@pytest.mark.parametrize("instance_type", sorted(MAX_PODS))
def test_headroom_covers_the_kubelet_reserve_with_room_for_daemonsets(instance_type):
    instance = TRAINIUM_INSTANCES[instance_type]
    cpu, memory_gib = node_headroom(instance)
    reserved_cpu, reserved_gib = _kube_reserved(instance.vcpus, MAX_PODS[instance_type])
    # At least 7 vCPUs and 28 GiB stay for DaemonSets and the kernel's share once the kubelet
    # has its reserve (on Trn1: 8 - 0.39 vCPUs and 32 - 3 GiB).
    assert cpu - reserved_cpu > 7 and memory_gib - reserved_gib > 28


def test_kube_reserved_rule_gives_the_numbers_the_component_quotes():
    assert _kube_reserved(128, 247) == (0.39, 3072 / 1024)  # trn1: 390m, 2,972 + 100 MiB
    assert _kube_reserved(192, 100) == (0.55, 1455 / 1024)  # trn2: 550m, 1,355 + 100 MiB
