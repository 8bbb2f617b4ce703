"""``make scan``: checkov over every synthesized template and every Kubernetes object we emit.

1. Synthesizes the app with cdk.json's settings into ``dist/scan/cfn/`` (cdk-nag on).
2. Writes every Kubernetes object the platform emits into ``dist/scan/k8s/``: the cluster
   charts, Triton and the NVIDIA plugin, and the training workloads; each Volcano Job's task
   templates are also written as Pods, so the pod checks see them.
3. Runs checkov (from its own venv, ``.venv-scan``: its pins conflict with boto3's) on both
   folders, reads ``.checkov-exceptions.yaml`` (every exception with its reason) and fails on
   any failed check that is not listed there, and on listed exceptions that no longer occur.

Usage: ``python scripts/scan.py [--checkov PATH]`` (``make scan`` creates the venv first).
"""

from __future__ import annotations

import argparse
import copy
import fnmatch
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "dist" / "scan"
EXCEPTIONS = ROOT / ".checkov-exceptions.yaml"


def synthesize_templates(out: Path) -> list[Path]:
    from ml_platform.app import build_platform, new_app, settings_from_app

    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    app = new_app(context=context, outdir=str(out))
    build_platform(app, settings_from_app(app), nag=True)
    app.synth()
    return sorted(out.glob("*.template.json"))


def kubernetes_objects(settings: Any = None) -> dict[str, list[dict[str, Any]]]:
    """Every Kubernetes object we emit, by file name (``settings``: default cdk.json's)."""
    import cdk8s

    from ml_platform.config import settings_from_cdk_json
    from ml_platform.k8s_charts.nvidia import NVIDIA_DEVICE_PLUGIN_IMAGE, NvidiaDevicePluginChart
    from ml_platform.k8s_charts.triton import TritonChart, TritonChartProps
    from ml_platform.k8s_charts.workloads import build_workload_manifests
    from ml_platform.stacks.training_cluster import cluster_charts

    if settings is None:
        settings = settings_from_cdk_json(str(ROOT / "cdk.json"))
    app = cdk8s.App()
    charts = cluster_charts(
        app,
        settings,
        file_system_id="fs-0123456789abcdef0",
        file_system_dns_name="fs.example",
        file_system_mount_name="mount",
    )
    out = {f"cluster-{name}": list(chart.to_json()) for name, chart in charts.items()}
    triton = settings.triton_on_eks
    out["triton"] = list(
        TritonChart(
            app,
            "triton",
            props=TritonChartProps(
                bucket_name="model-bucket",
                model_prefix=settings.storage.model_prefix,
                archives=triton.archives,
                triton_version=settings.inference.triton_version,
                region=settings.env.region,
                replicas=triton.replicas,
                images=settings.image_policy,
            ),
        ).to_json()
    )
    # The image policy applied as the stacks apply it (constructs/triton_eks.py).
    nvidia = NvidiaDevicePluginChart(
        app, "nvidia", image=settings.image_policy.resolve(NVIDIA_DEVICE_PLUGIN_IMAGE)
    )
    out["nvidia-device-plugin"] = list(nvidia.to_json())
    for name, docs in build_workload_manifests(settings).items():
        out[f"workload-{name}"] = docs
        pods = [
            _task_pod(doc, task)
            for doc in docs
            if doc["apiVersion"].startswith("batch.volcano.sh/")
            for task in doc["spec"].get("tasks", [])
        ]
        if pods:
            out[f"workload-{name}-pods"] = pods
    return out


def _task_pod(job: dict[str, Any], task: dict[str, Any]) -> dict[str, Any]:
    template = copy.deepcopy(task["template"])
    meta = template.get("metadata", {})
    meta["name"] = f"{job['metadata']['name']}-{task['name']}"
    meta["namespace"] = job["metadata"]["namespace"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}


def write_inputs() -> tuple[Path, Path]:
    shutil.rmtree(OUT, ignore_errors=True)
    cfn, k8s = OUT / "cfn", OUT / "k8s"
    k8s.mkdir(parents=True)
    synthesize_templates(cfn)
    for name, docs in kubernetes_objects().items():
        (k8s / f"{name}.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return cfn, k8s


def run_checkov(checkov: str, cfn: Path, k8s: Path) -> list[dict[str, Any]]:
    """checkov's JSON reports (one per framework)."""
    reports = []
    for folder, framework in ((cfn, "cloudformation"), (k8s, "kubernetes")):
        result = subprocess.run(
            [
                checkov,
                "--directory",
                str(folder),
                "--framework",
                framework,
                "--output",
                "json",
                "--compact",
                "--skip-download",
                "--soft-fail",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        try:
            parsed = json.loads(result.stdout)
        except ValueError:
            sys.exit(f"checkov gave no JSON for {folder}:\n{result.stderr[-2000:]}")
        reports += parsed if isinstance(parsed, list) else [parsed]
    return reports


def findings(reports: list[dict[str, Any]]) -> tuple[int, list[dict[str, str]]]:
    passed, failed = 0, []
    for report in reports:
        results = report.get("results", {})
        passed += len(results.get("passed_checks", []))
        for check in results.get("failed_checks", []):
            failed.append(
                {
                    "check": check["check_id"],
                    "file": Path(check["file_path"]).name,
                    "resource": check["resource"],
                    "name": check.get("check_name", ""),
                }
            )
    return passed, failed


def load_exceptions(path: Path = EXCEPTIONS) -> list[dict[str, str]]:
    """The exceptions, one per resource: an entry's ``resources`` list (the same check and
    reason for several named objects) becomes one entry per name, each of which must still
    match a finding."""
    data = yaml.safe_load(path.read_text()) or {}
    out = []
    for entry in data.get("exceptions", []):
        names = entry.get("resources") or ([entry["resource"]] if "resource" in entry else [])
        if (
            {"check", "reason"} - set(entry)
            or not names
            or ("resource" in entry and "resources" in entry)
            or not str(entry.get("reason", "")).strip()
        ):
            sys.exit(
                f"{path}: every exception needs check, resource (or a resources list) and a "
                f"reason: {entry}"
            )
        for name in names:
            one = {k: v for k, v in entry.items() if k != "resources"}
            one["resource"] = name
            out.append(one)
    return out


def unscoped(entry: dict[str, str]) -> str | None:
    """Why an exception's resource pattern is not scoped to named resources, else ``None``.

    A pattern must start with a literal kind and namespace (``Deployment.triton.``) or a
    CloudFormation type (``AWS::S3::Bucket.``): a leading wildcard accepts the finding on
    any object of any kind, present or future. Checks about images and limits
    (:data:`NAMED_ONLY`) take exact names only, so a new workload's tag-only image or a lost
    digest fails the scan instead of being absorbed.
    """
    resource = entry["resource"]
    if not re.fullmatch(r"(AWS::\w+::\w+|[A-Z][A-Za-z]+\.[a-z0-9-]+)\..+", resource):
        return f"{resource!r} does not start with a kind and namespace or a CloudFormation type"
    if entry["check"] in NAMED_ONLY and any(c in resource for c in "*?["):
        return f"{entry['check']} takes exact object names, not {resource!r}"
    return None


#: Checks whose exceptions name each object exactly: CPU limits (CKV_K8S_11), pull policy and
#: image digests (CKV_K8S_15 and CKV_K8S_43, both pass with a digest).
NAMED_ONLY = ("CKV_K8S_11", "CKV_K8S_15", "CKV_K8S_43")


def _listed(finding: dict[str, str], entry: dict[str, str]) -> bool:
    return (
        finding["check"] == entry["check"]
        and fnmatch.fnmatchcase(finding["resource"], entry["resource"])
        and fnmatch.fnmatchcase(finding["file"], entry.get("file", "*"))
    )


def compare(failed: list[dict[str, str]], exceptions: list[dict[str, str]]):
    unlisted = [f for f in failed if not any(_listed(f, e) for e in exceptions)]
    stale = [e for e in exceptions if not any(_listed(f, e) for f in failed)]
    return unlisted, stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkov", default=str(ROOT / ".venv-scan" / "bin" / "checkov"))
    args = parser.parse_args(argv)
    cfn, k8s = write_inputs()
    passed, failed = findings(run_checkov(args.checkov, cfn, k8s))
    exceptions = load_exceptions()
    loose = [f"{e['check']}: {why}" for e in exceptions if (why := unscoped(e))]
    if loose:
        sys.exit(f"{EXCEPTIONS.name}: unscoped exceptions:\n  " + "\n  ".join(loose))
    unlisted, stale = compare(failed, exceptions)
    print(
        f"checkov: {passed} checks passed, {len(failed)} failed, all but {len(unlisted)} "
        f"listed in {EXCEPTIONS.name} ({len(exceptions)} exceptions)"
    )
    for f in unlisted:
        print(f"  UNLISTED {f['check']} {f['file']} {f['resource']}: {f['name']}")
    for e in stale:
        print(f"  STALE exception {e['check']} {e['resource']}: no longer found; remove it")
    return 1 if unlisted or stale else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
