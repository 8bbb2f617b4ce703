"""The training workload manifests: schemas, contents, TorchX equivalence, determinism."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import shlex
import warnings
from pathlib import Path
from typing import Any

import cdk8s
import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes.client import ApiClient
from syrupy.extensions.json import JSONSnapshotExtension
from torchx.components import dist
from torchx.schedulers import kubernetes_scheduler

from ml_platform.config import Settings, SettingsError
from ml_platform.k8s_charts import workloads
from ml_platform.training import jobs
from ml_platform.training.component import MEMLOCK_CHECK, trainium_ddp

K8S_VERSION = "1.35.0"
VOLCANO = "batch.volcano.sh/v1alpha1"

# What Volcano 1.15's Job CRD (batch.volcano.sh_jobs.yaml, v1alpha1 schema) requires of the
# fields these manifests use. The CRD is structural: unknown fields are pruned silently, so
# anything not listed here is rejected ("additionalProperties": false). Pod templates are
# checked separately against the core/v1 schema.
_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
_INT32 = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_EVENTS = ["*", "PodPending", "PodRunning", "PodFailed", "PodEvicted", "Unknown",
           "TaskCompleted", "OutOfSync", "CommandIssued", "JobUpdated", "TaskFailed"]  # fmt: skip
_ACTIONS = ["AbortJob", "RestartJob", "RestartTask", "RestartPod", "TerminateJob",
            "CompleteJob", "ResumeJob"]  # fmt: skip
_POLICY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "event": {"enum": _EVENTS},
        "events": {"type": "array", "items": {"enum": _EVENTS}},
        "action": {"enum": _ACTIONS},
        "exitCode": {"type": "integer"},
        "timeout": {"type": "string"},
    },
}
VOLCANO_JOB_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": VOLCANO},
        "kind": {"const": "Job"},
        "metadata": {
            "type": "object",
            "required": ["name", "namespace"],
            "properties": {
                "name": {"type": "string", "pattern": _DNS_LABEL},
                "namespace": {"type": "string"},
                "labels": _STRING_MAP,
                "annotations": _STRING_MAP,
            },
            "additionalProperties": False,
        },
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["schedulerName", "queue", "tasks"],
            "properties": {
                "schedulerName": {"type": "string"},
                "queue": {"type": "string"},
                "maxRetry": _INT32,
                "minAvailable": _INT32,
                "priorityClassName": {"type": "string"},
                "policies": {"type": "array", "items": _POLICY},
                "plugins": {
                    "type": "object",
                    "additionalProperties": {"type": "array", "items": {"type": "string"}},
                },
                "tasks": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "replicas", "template"],
                        "properties": {
                            "name": {"type": "string", "pattern": _DNS_LABEL},
                            "replicas": _INT32,
                            "minAvailable": _INT32,
                            "maxRetry": _INT32,
                            "policies": {"type": "array", "items": _POLICY},
                            "template": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {
                                    "metadata": {
                                        "type": "object",
                                        "additionalProperties": False,
                                        "properties": {
                                            "labels": _STRING_MAP,
                                            "annotations": _STRING_MAP,
                                            "name": {"type": "string"},
                                            "namespace": {"type": "string"},
                                        },
                                    },
                                    "spec": {"type": "object"},
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def all_docs(manifests: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [doc for docs in manifests.values() for doc in docs]


def container(job: dict[str, Any], task: int = 0) -> dict[str, Any]:
    (only,) = job["spec"]["tasks"][task]["template"]["spec"]["containers"]
    return only


def env_of(c: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in c["env"]}


ROOT_COMM_EXPORT = "export NEURON_RT_ROOT_COMM_ID=${VC_WORKER_0_HOSTS:-localhost}:48620"
RESUME_ARGS = "${resume[@]}"  # as shlex splits '"${resume[@]}"'


def argv_of(c: dict[str, Any]) -> list[str]:
    """The launcher's command line as bash splits it: the ``exec`` statement ending
    ``bash -c <line>``, without the resume arguments (see test_resume.py)."""
    assert c["command"][:2] == ["bash", "-c"] and len(c["command"]) == 3 and "args" not in c
    *prologue, launch = c["command"][2].split("; exec ")
    memlock_check = MEMLOCK_CHECK.replace("$$", "$")  # as TorchX renders its `$$` escapes
    assert prologue[0].startswith(memlock_check + "; ")
    assert prologue[0].removeprefix(memlock_check + "; ").split("; ")[0] == ROOT_COMM_EXPORT
    argv = shlex.split(launch)
    return argv[:-1] if argv[-1] == RESUME_ARGS else argv


# --- files and schemas ---------------------------------------------------------------


def test_one_file_per_concern(manifests):
    kinds = {
        name: [f"{d['apiVersion']}/{d['kind']}" for d in docs] for name, docs in manifests.items()
    }
    assert kinds == {
        "training-dataset.yaml": ["v1/ConfigMap", "batch/v1/Job"],
        "training-precompile.yaml": [f"{VOLCANO}/Job"],
        "training-pretrain.yaml": [f"{VOLCANO}/Job"],
        "training-tensorboard.yaml": ["apps/v1/Deployment", "v1/Service"],
    }


def test_everything_is_namespaced_in_the_training_namespace(manifests, settings):
    for doc in all_docs(manifests):
        assert doc["metadata"]["namespace"] == settings.training.namespace


@pytest.mark.parametrize("which", ["manifests", "trn1n_manifests", "trn2_manifests"])
def test_core_objects_validate_against_kubernetes_1_35_strict(which, request):
    for doc in all_docs(request.getfixturevalue(which)):
        if doc["apiVersion"] != VOLCANO:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


@pytest.mark.parametrize("which", ["volcano_jobs", "trn1n_volcano_jobs", "trn2_volcano_jobs"])
def test_volcano_jobs_fit_the_volcano_crd(which, request):
    for job in request.getfixturevalue(which).values():
        jsonschema.validate(job, VOLCANO_JOB_SCHEMA)
        for task in job["spec"]["tasks"]:
            pod_template = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": task["name"], "namespace": job["metadata"]["namespace"]},
                "template": task["template"],
            }
            kubernetes_validate.validate(pod_template, K8S_VERSION, strict=True)


def test_the_structural_check_catches_fields_volcano_would_prune(volcano_jobs):
    job = copy.deepcopy(volcano_jobs["bert-pretrain"])
    job["spec"]["tasks"][0]["replica"] = 2  # typo of `replicas`
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(job, VOLCANO_JOB_SCHEMA)


# --- Volcano Job contents ------------------------------------------------------------


@pytest.mark.parametrize("name", ["bert-precompile", "bert-pretrain"])
def test_volcano_job_runs_on_every_neuroncore_of_two_trn1_nodes(name, volcano_jobs, settings):
    job = volcano_jobs[name]
    spec = job["spec"]
    assert spec["schedulerName"] == "volcano"
    assert spec["queue"] == settings.training.queue
    assert spec["maxRetry"] == 3
    assert [(t["name"], t["replicas"], t["maxRetry"]) for t in spec["tasks"]] == [
        ("worker-0", 1, 3),
        ("worker-1", 1, 3),
    ]
    for i, task in enumerate(spec["tasks"]):
        pod = task["template"]["spec"]
        c = container(job, i)
        assert c["image"] == settings.training_image_uri
        assert c["resources"]["limits"]["aws.amazon.com/neuron"] == "16"
        assert c["resources"]["limits"]["vpc.amazonaws.com/efa"] == "8"
        assert not any("neurondevice" in key for key in c["resources"]["limits"])
        assert {"cpu", "memory"} <= set(c["resources"]["requests"])
        assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "trn1.32xlarge"}
        toleration = {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"}
        assert toleration in pod["tolerations"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        assert volumes[mounts["/data"]]["persistentVolumeClaim"] == {"claimName": "fsx-claim"}
        assert volumes[mounts["/dev/shm"]]["emptyDir"] == {"medium": "Memory"}
        env = env_of(c)
        assert env["NEURON_CC_FLAGS"] == f"--cache_dir=/data/neuron_cache/bert-large_{i}"
        # One Hugging Face cache for every pod, pre-seeded by the dataset Job, read offline.
        assert (env["HF_HOME"], env["HF_HUB_OFFLINE"]) == ("/data/hf_home", "1")
        assert {
            "CCOM_SOCKET_IFNAME": "eth0",
            "FI_PROVIDER": "efa",
            "FI_EFA_USE_DEVICE_RDMA": "1",
            "FI_EFA_FORK_SAFE": "1",
            "NEURON_RT_RESET_CORES": "1",
            "XLA_TRANSFER_SEED_ASYNC": "1",
        }.items() <= env.items()


@pytest.mark.parametrize("name", ["bert-precompile", "bert-pretrain"])
def test_neuron_recipe_of_the_pinned_sample(name, volcano_jobs):
    """aws-neuron-samples dp_bert_hf_pretrain run scripts at the pinned commit (Neuron 2.30)."""
    for i, task in enumerate(volcano_jobs[name]["spec"]["tasks"]):
        c = container(volcano_jobs[name], i)
        env = env_of(c)
        # bf16 by the script's own model.to(torch.bfloat16): XLA_DOWNCAST_BF16 is unsupported
        # since Neuron 2.24 and makes the script skip that cast; TRANSFORMERS_CACHE is
        # deprecated in favour of HF_HOME.
        assert not {"XLA_DOWNCAST_BF16", "XLA_USE_BF16", "TRANSFORMERS_CACHE"} & set(env)
        assert "--enable_fp32" not in argv_of(c)
        assert env["NEURON_RT_EXEC_TIMEOUT"] == "600"
        assert env["NEURON_RT_STOCHASTIC_ROUNDING_SEED"] == "0"
        assert env["BUCKET_CAP_MB"] == "512"
        # The collectives bootstrap port, reserved through a safe (namespaced) pod sysctl.
        pod = task["template"]["spec"]
        assert pod["securityContext"]["sysctls"] == [
            {"name": "net.ipv4.ip_local_reserved_ports", "value": "48620"}
        ]
        # No Kubernetes API and no AWS credentials in the workers: no token mounted.
        assert pod["automountServiceAccountToken"] is False
        assert c["ports"] == [{"containerPort": 29500, "name": "c10d"}]


@pytest.mark.parametrize(
    ("instance_type", "nodes", "accum"),
    [
        *[("trn1.32xlarge", n, a) for n, a in [(1, 32), (2, 16), (4, 8), (8, 4), (32, 1)]],
        # 64 workers per trn2.48xlarge: half the micro-steps of Trn1's 32 for the same batch.
        *[("trn2.48xlarge", n, a) for n, a in [(1, 16), (2, 8), (4, 4), (8, 2), (16, 1)]],
    ],
)
def test_grad_accumulation_keeps_the_recipe_global_batch(instance_type, nodes, accum):
    settings = Settings.from_context(
        {
            "trainium": {
                "instance_type": instance_type,
                "nodes": nodes,
                "min_nodes": nodes,
                "max_nodes": nodes,
            }
        }
    )
    assert jobs.bert_problems(settings) == []
    for job in jobs.bert_jobs(settings):
        args = list(job.script_args)
        batch = int(args[args.index("--batch_size") + 1])
        steps = int(args[args.index("--grad_accum_usteps") + 1])
        assert (batch, steps) == (16, accum)
        assert nodes * job.workers_per_node * batch * steps == 16_384


def test_grad_accumulation_needs_a_node_count_dividing_the_recipe():
    settings = Settings.from_context({"trainium": {"nodes": 3, "max_nodes": 3}})
    expected = r"trainium.nodes = 3: .*expected one of \[1, 2, 4, 8, 16, 32\]"
    with pytest.raises(ValueError, match=expected):
        workloads.build_workload_manifests(settings)


def test_trn2_grad_accumulation_allows_half_the_node_counts():
    """32 trn2 nodes would need half a micro-step each: refused, with what Trn2 allows."""
    settings = Settings.from_context(
        {"trainium": {"instance_type": "trn2.48xlarge", "nodes": 32, "max_nodes": 32}}
    )
    expected = (
        "trainium.nodes = 32: the BERT recipe keeps its global batch of 16,384 sequences by "
        "dividing 16 accumulation micro-steps (64 workers per trn2.48xlarge x 16 sequences "
        "each) by the node count; expected one of [1, 2, 4, 8, 16]"
    )
    assert jobs.bert_problems(settings) == [expected]
    with pytest.raises(ValueError, match=re.escape(expected)):
        workloads.build_workload_manifests(settings)


def test_a_worker_count_that_does_not_divide_the_global_batch_is_refused(monkeypatch):
    from ml_platform.instances import TRAINIUM_INSTANCES

    odd = dataclasses.replace(TRAINIUM_INSTANCES["trn2.48xlarge"], neuron_cores=48)
    monkeypatch.setitem(TRAINIUM_INSTANCES, "trn2.48xlarge", odd)
    settings = Settings.from_context({"trainium": {"instance_type": "trn2.48xlarge"}})
    assert jobs.bert_problems(settings) == [
        "trainium.instance_type = 'trn2.48xlarge': its 48 workers x 16 sequences do not "
        "divide the BERT recipe's global batch of 16,384 sequences"
    ]


TORCHRUN = [
    "python3", "-m", "torch.distributed.run",
    "--rdzv_backend", "c10d", "--rdzv_conf", "read_timeout=600",
]  # fmt: skip
BERT_ARGS = [
    "dp_bert_large_hf_pretrain_hdf5.py",
    "--batch_size", "16", "--grad_accum_usteps", "16",
    "--data_dir", "/data/datasets/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128",
    "--output_dir", "/data/output",
]  # fmt: skip
# TorchX's rank-0 host: the first pod hosts the store, the others find it by Volcano DNS name.
ENDPOINTS = ["${TORCHX_RANK0_HOST:=localhost}:29500", "${VC_WORKER_0_HOSTS:=localhost}:29500"]


def test_pretrain_command_is_the_c10d_rendezvous_on_the_first_pod(volcano_jobs):
    for i, endpoint in enumerate(ENDPOINTS):
        assert argv_of(container(volcano_jobs["bert-pretrain"], i)) == [
            *TORCHRUN,
            "--rdzv_endpoint", endpoint,
            "--rdzv_id", "bert-pretrain",
            "--nnodes", "2", "--nproc_per_node", "32", "--tee", "3",
            *BERT_ARGS,
        ]  # fmt: skip


def test_precompile_wraps_the_same_command_in_neuron_parallel_compile(volcano_jobs):
    for i, endpoint in enumerate(ENDPOINTS):
        assert argv_of(container(volcano_jobs["bert-precompile"], i)) == [
            "neuron_parallel_compile",
            *TORCHRUN,
            "--rdzv_endpoint", endpoint,
            "--rdzv_id", "bert-precompile",
            "--nnodes", "2", "--nproc_per_node", "32", "--tee", "3",
            *BERT_ARGS,
            "--steps_this_run", "10",
        ]  # fmt: skip


def test_torchrun_reads_the_rendezvous_settings(volcano_jobs):
    """torchrun's own parser: c10d, a 600 s wait for the store (pods may start minutes apart
    while their nodes pull the image), the job's run id, 2 x 32 workers."""
    from torch.distributed.run import config_from_args, get_args_parser

    for i in range(2):
        argv = argv_of(container(volcano_jobs["bert-pretrain"], i))
        config, _cmd, cmd_args = config_from_args(get_args_parser().parse_args(argv[3:]))
        assert (config.rdzv_backend, config.run_id) == ("c10d", "bert-pretrain")
        assert (config.min_nodes, config.max_nodes, config.nproc_per_node) == (2, 2, 32)
        assert config.rdzv_configs["read_timeout"] == "600"
        assert config.max_restarts == 0  # Volcano restarts the job, torchrun does not
        assert "dp_bert_large_hf_pretrain_hdf5.py" in cmd_args


def test_rendezvous_endpoint_is_the_one_torchx_dist_torchrun_renders(volcano_jobs, settings):
    """Same host macro and port as TorchX's own c10d component, rendered by the same scheduler."""
    app = dist.torchrun(script="worker.py", j="2x32", image=settings.training_image_uri)
    reference = _torchx_dryrun(app, settings)

    def endpoints(job: dict[str, Any]) -> list[str]:
        return [
            re.search(r"--rdzv_endpoint (\S+)", container(job, i)["command"][-1]).group(1)
            for i in range(len(job["spec"]["tasks"]))
        ]

    assert endpoints(reference) == endpoints(volcano_jobs["bert-pretrain"]) == ENDPOINTS


def test_trn1n_nodes_get_all_sixteen_efa_interfaces(trn1n_volcano_jobs):
    for job in trn1n_volcano_jobs.values():
        for i in range(2):
            c = container(job, i)
            assert c["resources"]["limits"]["vpc.amazonaws.com/efa"] == "16"
            assert c["resources"]["limits"]["aws.amazon.com/neuron"] == "16"
        pod = job["spec"]["tasks"][0]["template"]["spec"]
        assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "trn1n.32xlarge"}


TRN2_ENV = {
    "CCOM_SOCKET_IFNAME": "eth0",
    "FI_PROVIDER": "efa",
    "FI_EFA_USE_DEVICE_RDMA": "1",
    "FI_EFA_FORK_SAFE": "1",
    "NEURON_RT_RESET_CORES": "1",
    "XLA_TRANSFER_SEED_ASYNC": "1",
    "NEURON_RT_EXEC_TIMEOUT": "600",
    "NEURON_RT_STOCHASTIC_ROUNDING_SEED": "0",
    "BUCKET_CAP_MB": "512",
    # Trn2's default LNC, for the runtime and the compiler alike, and its compiler target.
    "NEURON_LOGICAL_NC_CONFIG": "2",
    "NEURON_CC_FLAGS": "--cache_dir=/data/neuron_cache/bert-large_{i} --target=trn2 "
    "--logical-nc-config=2",
    "HF_HOME": "/data/hf_home",
    "HF_HUB_OFFLINE": "1",
}


@pytest.mark.parametrize(
    ("name", "extra"), [("bert-pretrain", []), ("bert-precompile", ["--steps_this_run", "10"])]
)
def test_trn2_jobs_run_64_workers_per_node_with_the_trn2_compiler(
    name, extra, trn2_volcano_jobs, trn2_settings
):
    job = trn2_volcano_jobs[name]
    assert [t["replicas"] for t in job["spec"]["tasks"]] == [1, 1]
    for i, (task, endpoint) in enumerate(zip(job["spec"]["tasks"], ENDPOINTS, strict=True)):
        pod = task["template"]["spec"]
        c = container(job, i)
        assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "trn2.48xlarge"}
        # Every chip and every EFA interface; 192 vCPUs and 2048 GiB less 1/16 each (TorchX
        # writes memMB as M and requests 100m and 1024 M less than the limits).
        assert c["resources"] == {
            "limits": {
                "cpu": "180000m",
                "memory": f"{1920 * 1024}M",
                "aws.amazon.com/neuron": "16",
                "vpc.amazonaws.com/efa": "16",
            },
            "requests": {"cpu": "179900m", "memory": f"{1920 * 1024 - 1024}M"},
        }
        env = env_of(c)
        assert env.pop("TORCHX_IMAGE") == trn2_settings.training_image_uri
        assert env.pop("TORCHX_RANK0_HOST", None) == ("localhost" if i == 0 else None)
        expected = {k: v.format(i=i) for k, v in TRN2_ENV.items()}
        assert env == expected
        # 2 nodes x 64 workers x 16 sequences x 8 micro-steps = the recipe's 16,384.
        launcher = ["neuron_parallel_compile"] if name == "bert-precompile" else []
        bert_args = [*BERT_ARGS]
        bert_args[bert_args.index("--grad_accum_usteps") + 1] = "8"
        assert argv_of(c) == [
            *launcher,
            *TORCHRUN,
            "--rdzv_endpoint", endpoint,
            "--rdzv_id", name,
            "--nnodes", "2", "--nproc_per_node", "64", "--tee", "3",
            *bert_args,
            *extra,
        ]  # fmt: skip
        # Every worker needs a dataset shard: 128 of them.
        assert "fewer than the 128 workers of this job" in c["command"][2]


def test_trn2_volcano_jobs_snapshot(trn2_volcano_jobs, snapshot):
    assert trn2_volcano_jobs == snapshot(extension_class=JSONSnapshotExtension)


def test_rank0_pods_carry_the_labels_the_readme_selects_on(volcano_jobs):
    # README_SECTION.md: kubectl logs -l app.kubernetes.io/instance=bert-pretrain
    for task in volcano_jobs["bert-pretrain"]["spec"]["tasks"]:
        labels = task["template"]["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == "bert-pretrain"


# --- the same as TorchX's own rendering ----------------------------------------------


def _torchx_dryrun(app, settings: Settings) -> dict[str, Any]:
    scheduler = kubernetes_scheduler.create_scheduler("test")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = scheduler.submit_dryrun(
            app,
            {"queue": settings.training.queue, "namespace": settings.training.namespace,
             "validate_spec": False},
        )  # fmt: skip
    return ApiClient().sanitize_for_serialization(info.request.resource)


@pytest.mark.parametrize(
    ("name", "extra", "precompile"),
    [("bert-pretrain", [], False), ("bert-precompile", ["--steps_this_run", "10"], True)],
)
def test_emitted_job_is_torchx_dryrun_output_apart_from_names(
    name, extra, precompile, volcano_jobs, settings
):
    app = trainium_ddp(
        *BERT_ARGS[1:], *extra,
        script=BERT_ARGS[0], image=settings.training_image_uri, nnodes=2,
        cacheset="bert-large", precompile=precompile, name=name,
        resume=not precompile,  # training resumes from its newest checkpoint
        data_shards="*_training_*.hdf5",  # both count the dataset's shards first
        hf_offline=True,  # and read bert-large-uncased from the pre-seeded cache
    )  # fmt: skip
    raw = _torchx_dryrun(app, settings)
    unique = raw["metadata"]["name"]
    assert re.fullmatch(rf"{name}-[a-z0-9]+", unique)
    expected = json.loads(json.dumps(raw).replace(unique, name))
    expected["metadata"]["namespace"] = settings.training.namespace
    # ...and apart from the securityContext every container gets (issue #13)
    from ml_platform.training.render import TRAINING_SECURITY_CONTEXT, harden_containers

    assert volcano_jobs[name] == harden_containers(expected)
    for task in volcano_jobs[name]["spec"]["tasks"]:
        for container in task["template"]["spec"]["containers"]:
            assert container["securityContext"] == TRAINING_SECURITY_CONTEXT


# --- helpers: dataset copy and TensorBoard -------------------------------------------


def test_dataset_job_copies_the_public_tarball_idempotently(manifests, settings):
    tools, job = manifests["training-dataset.yaml"]
    pod = job["spec"]["template"]["spec"]
    _prepare, download = pod["initContainers"]
    _hf_cache, extract = pod["containers"]
    assert job["spec"]["backoffLimit"] >= 1
    assert pod["nodeSelector"] == {"ml-platform/node-role": "system"}
    assert "tolerations" not in pod
    assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "fsx-claim"}
    for c in (download, extract):
        assert {"mountPath": "/data", "name": "data"} in c["volumeMounts"]
        assert set(c["resources"]["requests"]) == {"cpu", "memory"}
        assert ":latest" not in c["image"] and ":" in c["image"].rsplit("/", 1)[-1]
    env = env_of(download)
    assert env["DATASET_URI"] == (
        "s3://neuron-s3/training_datasets/bert_pretrain_wikicorpus_tokenized_hdf5/"
        "bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128.tar"
    )
    assert "aws s3 cp --no-sign-request" in download["args"][0]
    # Each step skips its work once the marker exists (the extract step: dataset_extract.py).
    assert 'if [ -e "$DONE_MARKER" ]' in download["args"][0]
    assert extract["command"] == ["python3", "-I", "/opt/dataset-tools/dataset_extract.py"]
    assert env_of(extract)["DATA_DIR"] == (
        "/data/datasets/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128"
    )
    assert env_of(extract)["DATASET_SHA256"] == ""  # cdk.json pins none: the Job warns
    # The extract step and the safe extractor come from the manifest's own ConfigMap.
    assert tools["metadata"]["name"] == "bert-dataset-tools"
    assert set(tools["data"]) == {
        "dataset_extract.py",
        "archive_safety.py",
        "hf_seed.py",
        "hf-seed-requirements.lock",
    }
    assert {"name": "tools", "configMap": {"name": "bert-dataset-tools"}} in pod["volumes"]


def test_dataset_job_runs_as_root_only_to_hand_over_its_folders(manifests):
    """Only `prepare` runs as root, with CAP_CHOWN alone, and no network tool; download and
    extract run as an unprivileged user that owns /data/datasets and the staging folder."""
    _, job = manifests["training-dataset.yaml"]
    pod = job["spec"]["template"]["spec"]
    prepare, download = pod["initContainers"]
    hf_cache, extract = pod["containers"]
    assert pod["securityContext"]["runAsUser"] == pod["securityContext"]["runAsGroup"] == 65532
    assert prepare["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"add": ["CHOWN"], "drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsGroup": 0,
        "runAsNonRoot": False,
        "runAsUser": 0,
    }
    assert (
        'chown "$DATASET_UID:$DATASET_UID" "$DATASETS_DIR" "$STAGING_DIR" "$HF_HOME"'
        in prepare["args"][0]
    )
    assert env_of(prepare) == {
        "DATASETS_DIR": "/data/datasets",
        "STAGING_DIR": "/data/.staging",
        "HF_HOME": "/data/hf_home",
        "DATASET_UID": "65532",
    }
    for c in (download, extract, hf_cache):
        assert c["securityContext"]["runAsNonRoot"] is True
        assert "runAsUser" not in c["securityContext"]  # the pod's 65532
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_dataset_job_pre_seeds_the_hugging_face_cache_from_a_small_image(manifests, settings):
    """Issue 32: the hf-cache step ran the training image (the multi-GB Neuron DLC) on a
    system node for one download. It now runs hf_seed.py from the tools ConfigMap on the
    pinned slim Python image, non-root on a read-only root, writing only to /tmp (emptyDir)
    and the cache on FSx that every training pod reads offline."""
    from ml_platform.k8s_charts.network_policies import TrainingNetworkPolicyChart
    from ml_platform.training import hf_seed

    tools, job = manifests["training-dataset.yaml"]
    pod = job["spec"]["template"]["spec"]
    hf_cache, _ = pod["containers"]
    assert hf_cache["image"] == "public.ecr.aws/docker/library/python:3.12.14-slim"
    assert hf_cache["image"] != settings.training_image_uri
    assert hf_cache["command"] == ["python3", "-I", "/opt/dataset-tools/hf_seed.py"]
    assert env_of(hf_cache) == {
        "HF_HOME": "/data/hf_home",  # the training pods' HF_HOME (HF_CACHE_DIR)
        "HF_MODEL": "bert-large-uncased",  # the script's from_pretrained name
        "HF_SEED_PACKAGES": "/tmp/hf-seed-packages",
        "HOME": "/tmp",
    }
    assert jobs.BERT_HF_MODEL == "bert-large-uncased"
    assert hf_cache["resources"] == {
        "requests": {"cpu": "250m", "memory": "256Mi"},
        "limits": {"memory": "1Gi"},
    }
    assert hf_cache["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
    }
    assert pod["securityContext"]["runAsUser"] == 65532
    mounts = {m["mountPath"]: m for m in hf_cache["volumeMounts"]}
    assert set(mounts) == {"/data", "/tmp", "/opt/dataset-tools"}
    assert mounts["/opt/dataset-tools"]["readOnly"] is True
    assert {"name": "tmp", "emptyDir": {}} in pod["volumes"]
    # The step and its lock ship in the manifest's own ConfigMap, as read from the package.
    lock = Path(hf_seed.__file__).with_name("hf-seed-requirements.lock")
    assert tools["data"]["hf_seed.py"] == Path(hf_seed.__file__).read_text()
    assert tools["data"]["hf-seed-requirements.lock"] == lock.read_text()
    # PyPI and the Hub are HTTPS on public addresses, which the dataset pods may reach.
    (policy,) = [
        p
        for p in TrainingNetworkPolicyChart(cdk8s.App(), "p", namespace="training").to_json()
        if p["metadata"]["name"] == "allow-https-dataset"
    ]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= (
        job["spec"]["template"]["metadata"]["labels"].items()
    )
    (rule,) = policy["spec"]["egress"]
    assert rule["ports"] == [{"port": 443, "protocol": "TCP"}]
    assert rule["to"][0]["ipBlock"]["cidr"] == "0.0.0.0/0"


def test_a_pinned_dataset_digest_reaches_the_job():
    digest = "ab" * 32
    settings = Settings.from_context({"training": {"dataset_sha256": digest}})
    _, job = workloads.build_workload_manifests(settings)["training-dataset.yaml"]
    _, extract = job["spec"]["template"]["spec"]["containers"]
    assert env_of(extract)["DATASET_SHA256"] == digest
    with pytest.raises(
        SettingsError,
        match=r"training.dataset_sha256 = 'AB12': expected a "
        r"SHA-256 of 64 lower-case hex digits",
    ):
        Settings.from_context({"training": {"dataset_sha256": "AB12"}})


def test_tensorboard_is_private_unprivileged_and_reads_the_output(manifests):
    deployment, service = manifests["training-tensorboard.yaml"]
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"].items() <= (
        deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    pod = deployment["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["args"][:2] == ["--logdir", "/data/output"]
    assert {"mountPath": "/data", "name": "data", "readOnly": True} in c["volumeMounts"]
    assert set(c["resources"]["requests"]) == {"cpu", "memory"}


def _pod_specs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod specs of a Job, Deployment or Volcano Job (none for other kinds)."""
    spec = doc.get("spec", {})
    if "tasks" in spec:
        return [task["template"]["spec"] for task in spec["tasks"]]
    return [spec["template"]["spec"]] if "template" in spec else []


def test_every_pod_mounting_fsx_runs_only_in_the_trainium_az(manifests, settings):
    """Issue 32: FSx for Lustre lives in network.trainium_az. Helper pods (system-role nodes)
    are REQUIRED there, not preferred; the Trainium pods reach it through their nodes, whose
    group has only that AZ's subnet (tests/unit/constructs/test_trainium.py)."""
    az = settings.network.trainium_az
    helpers = trainium = 0
    for doc in all_docs(manifests):
        for pod in _pod_specs(doc):
            claims = {
                v["persistentVolumeClaim"]["claimName"]
                for v in pod.get("volumes", [])
                if "persistentVolumeClaim" in v
            }
            if "fsx-claim" not in claims:
                continue
            selector = pod["nodeSelector"]
            if selector.get("node.kubernetes.io/instance-type") == settings.trainium.instance_type:
                trainium += 1
                continue
            helpers += 1
            assert selector == {"ml-platform/node-role": "system"}, doc["metadata"]["name"]
            assert pod["affinity"] == {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "topology.kubernetes.io/zone",
                                        "operator": "In",
                                        "values": [az],
                                    }
                                ]
                            }
                        ]
                    }
                }
            }, doc["metadata"]["name"]
    assert (helpers, trainium) == (2, 4)  # dataset Job, TensorBoard; 2 jobs x 2 tasks


# --- determinism, files, snapshot ----------------------------------------------------


def test_two_builds_are_identical(manifests, settings):
    assert workloads.build_workload_manifests(settings) == manifests


def test_cli_writes_one_yaml_file_per_concern(tmp_path: Path, cdk_json: Path, manifests):
    out = tmp_path / "k8s"
    assert workloads.main(["--out", str(out), "--cdk-json", str(cdk_json)]) == 0
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(manifests)
    for name, docs in manifests.items():
        text = (out / name).read_text()
        assert text.startswith("# Generated by")
        assert list(yaml.safe_load_all(text)) == docs


def test_cli_renders_trn2_jobs_when_cdk_json_says_trn2(
    tmp_path: Path, cdk_json: Path, trn2_manifests
):
    context = json.loads(cdk_json.read_text())["context"]
    context["ml-platform"] = {"trainium": {"instance_type": "trn2.48xlarge"}}
    cdk_json.write_text(json.dumps({"context": context}))
    out = tmp_path / "k8s"
    assert workloads.main(["--out", str(out), "--cdk-json", str(cdk_json)]) == 0
    for name in ("training-precompile.yaml", "training-pretrain.yaml"):
        (job,) = yaml.safe_load_all((out / name).read_text())
        assert job == trn2_manifests[name][0]
        pod = job["spec"]["tasks"][0]["template"]["spec"]
        assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "trn2.48xlarge"}


def test_cli_reports_invalid_settings(tmp_path: Path, capsys):
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(json.dumps({"context": {"ml-platform": {"trainium": {"nodes": "two"}}}}))
    assert workloads.main(["--out", str(tmp_path / "k8s"), "--cdk-json", str(cdk_json)]) == 1
    assert "trainium.nodes" in capsys.readouterr().err


def test_manifests_snapshot(manifests, snapshot):
    assert manifests == snapshot(extension_class=JSONSnapshotExtension)
