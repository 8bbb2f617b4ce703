"""The checkov exceptions file `make scan` reads: every entry has a reason, and the matching
that decides what fails the scan works (checkov itself runs in `make scan`, via .ci/run)."""

from __future__ import annotations

import importlib.util

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
