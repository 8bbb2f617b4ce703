"""``mlp train submit|rerun|status``: run the platform's Volcano training jobs safely.

The jobs are the ones ``make synth`` writes to ``dist/k8s`` (``bert-precompile``,
``bert-pretrain``), built here from the same settings, so nothing is typed by hand.

Why ``rerun`` is a command: Volcano's ``svc`` plugin gives every job a headless Service named
after the job and a ConfigMap ``<job>-svc`` with the pods' host names. When a job is created it
reuses a Service of that name if one exists (``createServiceIfNotExist``) and updates the
ConfigMap (``CreateOrUpdateConfigMap``), and the old job's objects go only when it deletes them
or the garbage collector gets to them (volcano v1.15.1
``pkg/controllers/job/plugins/svc/svc.go``,
https://github.com/volcano-sh/volcano/blob/v1.15.1/pkg/controllers/job/plugins/svc/svc.go).
``kubectl delete -f job.yaml && kubectl apply -f job.yaml`` therefore creates the new job while
those objects are about to vanish, and its pods can hang on a ConfigMap or DNS name that is
then deleted (https://github.com/volcano-sh/volcano/issues/1894). ``rerun`` deletes the job
in the foreground (its dependents first) and waits until the job, ``svc/<job>`` and
``cm/<job>-svc`` are all gone before it creates the job again, under the same name (so the
documented pod names, and the resume from ``/data/output``, stay valid).

Uses the Kubernetes API of the current kubeconfig context (``aws eks update-kubeconfig`` as in
docs/runbook.md); ``--context`` picks another.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from ml_platform_cli.aws import CliError, Context, Subcommands, doc_summary

VOLCANO_GROUP = "batch.volcano.sh"
VOLCANO_VERSION = "v1alpha1"
VOLCANO_PLURAL = "jobs"
SVC_CONFIGMAP_SUFFIX = "-svc"  # svc.go cmName: <job>-<plugin name>
POLL_S = 2.0
DEFAULT_TIMEOUT_S = 300


def add_parser(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "train",
        parents=parents,
        help="submit, rerun or inspect the BERT training jobs on the cluster",
        description=doc_summary(__doc__),
    )
    commands = p.add_subparsers(title="commands", metavar="COMMAND")
    for name, run, text in (
        ("submit", run_submit, "create the job (refused when one of that name exists)"),
        ("rerun", run_rerun, "delete the job and what Volcano made for it, wait, create it"),
        ("status", run_status, "the job's phase, retries and pods"),
    ):
        c = commands.add_parser(name, parents=parents, help=text, description=text)
        c.add_argument("job", help="job name: bert-precompile or bert-pretrain")
        c.add_argument("--context", help="kubeconfig context (default: the current one)")
        c.add_argument(
            "--namespace",
            help="must be the training namespace (training.namespace), the only one that "
            "holds fsx-claim; default: it",
        )
        if name == "rerun":
            c.add_argument(
                "--timeout",
                type=float,
                default=DEFAULT_TIMEOUT_S,
                help=f"seconds to wait for the old job to go (default {DEFAULT_TIMEOUT_S})",
            )
        if name == "status":
            c.add_argument("--json", action="store_true", help="print JSON")
        c.set_defaults(run=run)
    p.set_defaults(help_of=p)


def training_jobs(ctx: Context) -> dict[str, dict[str, Any]]:
    """The Volcano Jobs of the rendered training manifests, by name."""
    from ml_platform.k8s_charts.workloads import build_workload_manifests

    try:
        manifests = build_workload_manifests(ctx.settings)
    except ValueError as error:
        raise CliError(str(error)) from None
    return {
        doc["metadata"]["name"]: doc
        for docs in manifests.values()
        for doc in docs
        if doc.get("apiVersion", "").startswith(VOLCANO_GROUP + "/") and doc["kind"] == "Job"
    }


def kubernetes_apis(context: str | None) -> tuple[Any, Any]:
    """(CustomObjectsApi, CoreV1Api) of the kubeconfig ``context``. Tests replace this."""
    from kubernetes import client, config

    try:
        config.load_kube_config(context=context)
    except Exception as error:  # kubeconfig missing or the context unknown
        raise CliError(
            f"no Kubernetes access: {error} (run the UpdateKubeconfigCommand "
            "output of the TrainingCluster stack)"
        ) from None
    return client.CustomObjectsApi(), client.CoreV1Api()


def _not_found(error: Exception) -> bool:
    return getattr(error, "status", None) == 404


def _job(ctx: Context, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    namespace = ctx.settings.training.namespace
    asked = getattr(args, "namespace", None)
    if asked is not None and asked != namespace:
        raise CliError(
            f"--namespace {asked}: the training jobs run only in namespace {namespace} "
            "(training.namespace), which holds the fsx-claim volume and the training "
            f"policies; the cluster refuses them in namespace {asked} too"
        )
    jobs = training_jobs(ctx)
    if args.job not in jobs:
        raise CliError(
            f"{args.job!r}: not a training job of the platform; expected one of {sorted(jobs)}"
        )
    return jobs[args.job], namespace


def _read_job(custom: Any, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        job: dict[str, Any] = custom.get_namespaced_custom_object(
            VOLCANO_GROUP, VOLCANO_VERSION, namespace, VOLCANO_PLURAL, name
        )
    except Exception as error:
        if _not_found(error):
            return None
        raise
    return job


def leftovers(custom: Any, core: Any, namespace: str, name: str) -> list[str]:
    """What of job ``name`` still exists: the job, ``svc/<name>``, ``cm/<name>-svc``."""
    out = []
    if _read_job(custom, namespace, name) is not None:
        out.append(f"vcjob/{name}")
    for kind, read, obj in (
        ("svc", core.read_namespaced_service, name),
        ("cm", core.read_namespaced_config_map, name + SVC_CONFIGMAP_SUFFIX),
    ):
        try:
            read(obj, namespace)
        except Exception as error:
            if _not_found(error):
                continue
            raise
        out.append(f"{kind}/{obj}")
    return out


def delete_and_wait(
    custom: Any,
    core: Any,
    namespace: str,
    name: str,
    *,
    timeout: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Delete job ``name`` in the foreground and return once it, its Service and its svc
    ConfigMap are gone; CliError naming what is left after ``timeout`` seconds."""
    try:
        custom.delete_namespaced_custom_object(
            VOLCANO_GROUP,
            VOLCANO_VERSION,
            namespace,
            VOLCANO_PLURAL,
            name,
            propagation_policy="Foreground",
        )
    except Exception as error:
        if not _not_found(error):
            raise
    deadline = clock() + timeout
    while True:
        left = leftovers(custom, core, namespace, name)
        if not left:
            return
        if clock() >= deadline:
            raise CliError(
                f"{name}: still there after {timeout:g} s: {', '.join(left)}; "
                "creating the job now would reuse them (volcano-sh/volcano#1894)"
            )
        sleep(POLL_S)


def create(custom: Any, namespace: str, job: dict[str, Any]) -> None:
    custom.create_namespaced_custom_object(
        VOLCANO_GROUP, VOLCANO_VERSION, namespace, VOLCANO_PLURAL, job
    )


def run_submit(ctx: Context, args: argparse.Namespace) -> int:
    job, namespace = _job(ctx, args)
    custom, core = kubernetes_apis(args.context)
    left = leftovers(custom, core, namespace, args.job)
    if left:
        raise CliError(
            f"{args.job}: {', '.join(left)} already exist(s) in {namespace}; "
            f"use `mlp train rerun {args.job}` to replace the job"
        )
    create(custom, namespace, job)
    print(f"created vcjob/{args.job} in {namespace}")
    return 0


def run_rerun(ctx: Context, args: argparse.Namespace) -> int:
    job, namespace = _job(ctx, args)
    custom, core = kubernetes_apis(args.context)
    delete_and_wait(custom, core, namespace, args.job, timeout=args.timeout)
    print(f"deleted vcjob/{args.job}, svc/{args.job} and cm/{args.job}{SVC_CONFIGMAP_SUFFIX}")
    create(custom, namespace, job)
    print(f"created vcjob/{args.job} in {namespace}")
    return 0


def run_status(ctx: Context, args: argparse.Namespace) -> int:
    _, namespace = _job(ctx, args)
    custom, core = kubernetes_apis(args.context)
    job = _read_job(custom, namespace, args.job)
    if job is None:
        raise CliError(f"{args.job}: no such job in {namespace} (`mlp train submit {args.job}`)")
    status = job.get("status") or {}
    pods = core.list_namespaced_pod(
        namespace, label_selector=f"volcano.sh/job-name={args.job}"
    ).items
    report = {
        "job": args.job,
        "phase": (status.get("state") or {}).get("phase"),
        "retries": status.get("retryCount", 0),
        "running": status.get("running", 0),
        "pods": {p.metadata.name: p.status.phase for p in pods},
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(
            f"{args.job}: {report['phase']}, {report['retries']} retries, "
            f"{report['running']} running"
        )
        for pod, phase in sorted(report["pods"].items()):
            print(f"  {pod}: {phase}")
    return 0
