"""The checkov exceptions file `make scan` reads: every entry has a reason, and the matching
that decides what fails the scan works (checkov itself runs in `make scan`, via .ci/run)."""

from __future__ import annotations

import dataclasses
import importlib.util
import re

import pytest

from tests.support import ROOT

spec = importlib.util.spec_from_file_location("scan", ROOT / "scripts" / "scan.py")
scan = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scan)


def test_every_exception_names_check_resource_and_reason() -> None:
    entries = scan.load_exceptions()
    assert entries
    for entry in entries:
        assert entry["check"].startswith("CKV"), entry
        assert len(entry["reason"].strip()) > 30, entry


def test_unlisted_findings_and_stale_exceptions_fail_the_scan() -> None:
    failed = [
        {
            "check": "CKV_K8S_16",
            "file": "a.yaml",
            "resource": "DaemonSet.kube-system.aws-efa-k8s-device-plugin",
        },
        {"check": "CKV_K8S_16", "file": "a.yaml", "resource": "Deployment.triton.triton"},
    ]
    exceptions = [
        {"check": "CKV_K8S_16", "resource": "DaemonSet.kube-system.aws-efa-*", "reason": "r"},
        {"check": "CKV_AWS_21", "resource": "AWS::S3::Bucket.X", "reason": "r"},
    ]
    unlisted, stale = scan.compare(failed, exceptions)
    assert unlisted == [failed[1]]
    assert stale == [exceptions[1]]


def test_every_exception_is_scoped_to_named_resources() -> None:
    """No ``resource: "*"`` (or any leading wildcard): a new object of any kind would be
    absorbed. CPU-limit, pull-policy and digest exceptions name each object exactly."""
    entries = scan.load_exceptions()
    assert [(e["check"], scan.unscoped(e)) for e in entries if scan.unscoped(e)] == []
    assert scan.unscoped({"check": "CKV_K8S_40", "resource": "*.training.*"})
    assert scan.unscoped({"check": "CKV_K8S_43", "resource": "Pod.training.bert-*"})
    assert scan.unscoped({"check": "CKV_K8S_43", "resource": "Pod.training.x"}) is None


def test_reasons_cite_files_that_exist() -> None:
    """A reason naming a repository file names one that exists (one cited versions/images.py)."""
    text = (ROOT / ".checkov-exceptions.yaml").read_text()
    cited = set(re.findall(r"\b((?:ml_platform|scripts|tests)/[\w/]+\.py)\b", text))
    assert cited
    assert [path for path in sorted(cited) if not (ROOT / path).exists()] == []


# checkov 3.3.30's rules for these checks, taken from its source (kubernetes/checks/resource/
# k8s/ImageDigest.py, ImagePullPolicyAlways.py): a container fails CKV_K8S_43 when its image
# has no "@"; CKV_K8S_15 when it has no digest and its pull policy is not Always (an absent
# policy with a version tag is IfNotPresent). checkov itself runs in `make scan`; here the
# objects are the ones the scan writes, and the check is applied as checkov's source states.
def _containers(doc: dict) -> list[dict]:
    spec = doc.get("spec", {})
    pod = spec if doc["kind"] == "Pod" else spec.get("template", {}).get("spec", {})
    return [*pod.get("initContainers", []), *pod.get("containers", [])]


def _tag_only(objects: dict[str, list[dict]]) -> set[str]:
    """checkov names (``Kind.namespace.name``) of objects with a container image lacking a
    digest. Volcano Jobs are skipped as checkov skips them (their tasks are scanned as Pods)."""
    return {
        f"{doc['kind']}.{doc['metadata'].get('namespace', 'default')}.{doc['metadata']['name']}"
        for docs in objects.values()
        for doc in docs
        if not doc["apiVersion"].startswith("batch.volcano.sh/")
        and any("@" not in c["image"] for c in _containers(doc))
    }


def _findings(names: set[str]) -> list[dict[str, str]]:
    return [
        {"check": check, "file": "x.yaml", "resource": name}
        for name in sorted(names)
        for check in ("CKV_K8S_15", "CKV_K8S_43")
    ]


def _listed(check: str) -> set[str]:
    return {e["resource"] for e in scan.load_exceptions() if e["check"] == check}


@pytest.fixture(scope="module")
def emitted(settings) -> dict[str, list[dict]]:
    return scan.kubernetes_objects(settings)


def test_digest_exceptions_name_exactly_the_tag_only_objects(emitted) -> None:
    tag_only = _tag_only(emitted)
    assert tag_only
    assert _listed("CKV_K8S_43") == _listed("CKV_K8S_15") == tag_only


def test_a_new_tag_only_image_or_a_lost_digest_fails_the_scan(emitted, settings) -> None:
    checks = ("CKV_K8S_15", "CKV_K8S_43")
    exceptions = [e for e in scan.load_exceptions() if e["check"] in checks]
    tag_only = _tag_only(emitted)
    # A new workload pulling by tag only: unlisted, the scan fails.
    unlisted, stale = scan.compare(_findings(tag_only | {"Deployment.triton.new"}), exceptions)
    assert {f["resource"] for f in unlisted} == {"Deployment.triton.new"} and stale == []
    # Digests for every tag-only image (what `mlp images resolve` records): the objects they
    # pin no longer fail, so their exceptions go stale and the scan fails until removed.
    images = {c["image"] for docs in emitted.values() for d in docs for c in _containers(d)}
    digests = {i: "sha256:" + "0" * 64 for i in images if "@" not in i and i.count("/") >= 1}
    pinned_settings = dataclasses.replace(
        settings, images=dataclasses.replace(settings.images, digests=digests)
    )
    pinned = tag_only - _tag_only(scan.kubernetes_objects(pinned_settings))
    assert {
        "Deployment.triton.triton",
        "Deployment.training.tensorboard",
        "DaemonSet.kube-system.nvidia-device-plugin",
        "DaemonSet.kube-system.aws-efa-k8s-device-plugin",
    } <= pinned
    _, stale = scan.compare(_findings(tag_only - pinned), exceptions)
    assert {e["resource"] for e in stale} == pinned
    # Once those entries are removed, losing a digest again fails: unlisted.
    kept = [e for e in exceptions if e["resource"] not in pinned]
    unlisted, _ = scan.compare(_findings(tag_only), kept)
    assert {f["resource"] for f in unlisted} == pinned
