"""The TorchX component as the ``torchx`` CLI sees it."""

from __future__ import annotations

from pathlib import Path

import pytest
from torchx.specs import AppDef, RetryPolicy, VolumeMount
from torchx.specs.builders import materialize_appdef
from torchx.specs.file_linter import validate
from torchx.specs.finder import get_component
from torchx.specs.overlays import get_overlay

import ml_platform.training.component as component_module
from ml_platform.training.component import trainium_ddp

COMPONENT_FILE = str(Path(component_module.__file__))
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/ml-platform/training:v1"


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
            "--nproc_per_node", "16", "--bf16", "False", "--",
            "--batch_size", "16", "--output_dir", "/data/output",
        ],
    )  # fmt: skip
    (role,) = app.roles
    assert role.entrypoint == "python3"
    assert role.args[role.args.index("--nproc_per_node") + 1] == "16"
    assert role.args[-5:] == ["train.py", "--batch_size", "16", "--output_dir", "/data/output"]
    assert "XLA_DOWNCAST_BF16" not in role.env


def test_defaults_use_every_neuroncore_and_retry_the_whole_job():
    app = trainium_ddp(script="train.py", image=IMAGE)
    assert isinstance(app, AppDef)
    (role,) = app.roles
    assert role.args[role.args.index("--nproc_per_node") + 1] == "32"
    assert role.args[role.args.index("--nnodes") + 1] == "2"
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
            ]
        }
    }


def test_script_arguments_stay_separate_items():
    app = trainium_ddp(
        "--data_dir", "/data/with space", "--steps_this_run", "10",
        script="train.py", image=IMAGE, precompile=True,
    )  # fmt: skip
    (role,) = app.roles
    assert role.entrypoint == "neuron_parallel_compile"
    assert role.args[:3] == ["python3", "-m", "torch.distributed.run"]
    assert role.args[-5:] == [
        "train.py", "--data_dir", "/data/with space", "--steps_this_run", "10",
    ]  # fmt: skip
    assert role.args[role.args.index("--role") + 1] == ""


def test_trn1n_uses_sixteen_efa_interfaces():
    (role,) = trainium_ddp(script="t.py", image=IMAGE, instance_type="trn1n.32xlarge").roles
    assert role.resource.devices["vpc.amazonaws.com/efa"] == 16
