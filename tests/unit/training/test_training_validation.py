"""Build-time checks of training jobs: each rule, and all problems reported together."""

from __future__ import annotations

import dataclasses
import re

import pytest

from ml_platform.config import Settings
from ml_platform.k8s_charts.workloads import build_workload_manifests
from ml_platform.training.component import trainium_ddp
from ml_platform.training.jobs import TrainingJob, bert_args, bert_jobs, validate_jobs


@pytest.fixture(scope="module")
def pretrain(settings: Settings) -> TrainingJob:
    return bert_jobs(settings)[1]


def test_shipped_jobs_are_valid(settings):
    validate_jobs(settings, bert_jobs(settings))


def test_more_workers_than_the_clusters_neuroncores(settings, pretrain):
    job = dataclasses.replace(pretrain, nodes=3)
    with pytest.raises(ValueError, match=re.escape(
        "bert-pretrain: nodes x nproc_per_node = 3 x 32 = 96 workers: exceeds the cluster's "
        "64 NeuronCores (trainium.max_nodes = 2 x 32 per trn1.32xlarge)"
    )):  # fmt: skip
        validate_jobs(settings, [job])


def test_more_nodes_than_the_node_group_even_with_few_workers(settings, pretrain):
    # 4 x 16 = 64 workers fit in the cluster's NeuronCores; 4 whole nodes do not.
    job = dataclasses.replace(pretrain, nodes=4, nproc_per_node=16)
    with pytest.raises(ValueError, match=r"nodes = 4: exceeds trainium.max_nodes = 2") as error:
        validate_jobs(settings, [job])
    assert "NeuronCores (trainium" not in str(error.value)


def test_more_workers_per_node_than_neuroncores(settings, pretrain):
    job = dataclasses.replace(pretrain, nproc_per_node=33)
    with pytest.raises(ValueError, match=r"nproc_per_node = 33: expected 1 to 32"):
        validate_jobs(settings, [job])


def test_cache_set_with_illegal_characters(settings, pretrain):
    job = dataclasses.replace(pretrain, cache_set="../bert large")
    with pytest.raises(ValueError, match=r"cacheset = '\.\./bert large': expected letters, digits"):
        validate_jobs(settings, [job])


def test_precompile_without_a_step_bound(settings, pretrain):
    job = dataclasses.replace(pretrain, precompile=True)
    with pytest.raises(ValueError, match=r"precompile = True needs --steps_this_run"):
        validate_jobs(settings, [job])


def test_precompile_accepts_the_equals_form_of_the_step_bound(settings, pretrain):
    job = dataclasses.replace(
        pretrain,
        precompile=True,
        resume=False,
        script_args=bert_args(2, 32) + ("--steps_this_run=10",),
    )
    validate_jobs(settings, [job])


def test_instance_type_the_cluster_does_not_have(settings, pretrain):
    job = dataclasses.replace(pretrain, instance_type="trn1n.32xlarge")
    with pytest.raises(ValueError, match=re.escape(
        "instance_type = 'trn1n.32xlarge': the cluster's Trainium nodes are "
        "trainium.instance_type = 'trn1.32xlarge'"
    )):  # fmt: skip
        validate_jobs(settings, [job])


def test_unknown_instance_type(settings, pretrain):
    job = dataclasses.replace(pretrain, instance_type="trn3.48xlarge")
    with pytest.raises(ValueError, match=r"instance_type = 'trn3.48xlarge': expected one of"):
        validate_jobs(settings, [job])


def test_every_problem_is_reported_at_once(settings, pretrain):
    bad = dataclasses.replace(
        pretrain,
        nodes=3,
        cache_set="a/b",
        precompile=True,
        resume=False,
        instance_type="trn1n.32xlarge",
    )
    with pytest.raises(ValueError) as error:
        validate_jobs(settings, [bad, dataclasses.replace(pretrain, name="Bad_Name")])
    message = str(error.value)
    assert message.startswith("Invalid training jobs (6 problems):")
    for fragment in (
        "bert-pretrain: cacheset = 'a/b'",
        "bert-pretrain: precompile = True needs --steps_this_run",
        "bert-pretrain: instance_type = 'trn1n.32xlarge': the cluster's Trainium nodes",
        "bert-pretrain: nodes = 3: exceeds trainium.max_nodes = 2",
        "bert-pretrain: nodes x nproc_per_node = 3 x 32 = 96 workers",
        "Bad_Name: name = 'Bad_Name': expected lower-case letters",
    ):
        assert fragment in message
    assert message.count("\n  - ") == 6


def test_duplicate_job_names(settings, pretrain):
    with pytest.raises(ValueError, match=r"names must be unique, repeated: \['bert-pretrain'\]"):
        validate_jobs(settings, [pretrain, pretrain])


def test_shipped_jobs_follow_the_node_group_size():
    one_node = Settings.from_context({"trainium": {"min_nodes": 1, "nodes": 1, "max_nodes": 1}})
    manifests = build_workload_manifests(one_node)
    job = manifests["training-pretrain.yaml"][0]
    assert len(job["spec"]["tasks"]) == 1


def test_component_rejects_bad_parameters_all_at_once():
    with pytest.raises(ValueError) as error:
        trainium_ddp(
            script="", image="", nnodes=0, nproc_per_node=64, cacheset="x y",
            max_retries=-1, name="x" * 31,
        )  # fmt: skip
    message = str(error.value)
    assert "7 invalid parameters" in message
    for field in ("name =", "script =", "image =", "nnodes = 0", "nproc_per_node = 64",
                  "cacheset = 'x y'", "max_retries = -1"):  # fmt: skip
        assert field in message


def test_shard_and_resume_checks_need_their_directories(settings, pretrain):
    job = dataclasses.replace(pretrain, script_args=("--batch_size", "16"))
    with pytest.raises(ValueError) as error:
        validate_jobs(settings, [job])
    message = str(error.value)
    assert "data_shards = '*_training_*.hdf5' needs --data_dir <dir> in the script" in message
    assert "resume = True needs --output_dir <dir> in the script arguments" in message
