"""``mlp train`` with the real kubernetes client against a small stand-in of the Kubernetes API
(an HTTP server on localhost) that deletes like Volcano and the garbage collector do: the job
and what the svc plugin made for it (svc/<job>, cm/<job>-svc) vanish only some polls later."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from kubernetes import client

from ml_platform_cli import train

NS = "training"
JOBS = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs"


class FakeCluster:
    """Objects by path; a deleted object answers for ``linger[kind]`` more reads."""

    def __init__(self) -> None:
        self.objects: dict[str, dict] = {}
        self.dying: dict[str, int] = {}
        self.requests: list[tuple[str, str]] = []
        self.linger = {"jobs": 1, "services": 2, "configmaps": 3}
        self.created_while: list[list[str]] = []  # what existed at each create

    def put_job(self, name: str, phase: str = "Completed", retries: int = 0) -> None:
        self.objects[f"{JOBS}/{name}"] = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": NS},
            "status": {"state": {"phase": phase}, "retryCount": retries, "running": 0},
        }
        self.objects[f"/api/v1/namespaces/{NS}/services/{name}"] = {"kind": "Service"}
        self.objects[f"/api/v1/namespaces/{NS}/configmaps/{name}-svc"] = {"kind": "ConfigMap"}

    def handler(self):
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _missing(self) -> None:
                self._send(
                    404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404}
                )

            def do_GET(self):
                url = urlparse(self.path)
                cluster.requests.append(("GET", self.path))
                if url.path == f"/api/v1/namespaces/{NS}/pods":
                    selector = parse_qs(url.query)["labelSelector"][0]
                    job = selector.split("=", 1)[1]
                    pods = [
                        {
                            "metadata": {"name": f"{job}-worker-{i}-0"},
                            "status": {"phase": "Running"},
                        }
                        for i in (0, 1)
                    ]
                    return self._send(200, {"kind": "PodList", "items": pods})
                if url.path in cluster.dying:
                    cluster.dying[url.path] -= 1
                    if cluster.dying[url.path] < 0:
                        del cluster.dying[url.path]
                        cluster.objects.pop(url.path, None)
                if url.path in cluster.objects:
                    return self._send(200, cluster.objects[url.path])
                return self._missing()

            def do_DELETE(self):
                url = urlparse(self.path)
                cluster.requests.append(("DELETE", self.path))
                if url.path not in cluster.objects:
                    return self._missing()
                name = url.path.rsplit("/", 1)[1]
                if parse_qs(url.query).get("propagationPolicy") == ["Foreground"]:
                    # Dependents first; each goes a few reads later, the job last.
                    for kind, obj in (("services", name), ("configmaps", f"{name}-svc")):
                        cluster.dying[f"/api/v1/namespaces/{NS}/{kind}/{obj}"] = cluster.linger[
                            kind
                        ]
                    cluster.dying[url.path] = cluster.linger["configmaps"] + 1
                else:  # background: the job goes now, its dependents later
                    cluster.objects.pop(url.path)
                return self._send(200, {"kind": "Status", "status": "Success"})

            def do_POST(self):
                cluster.requests.append(("POST", self.path))
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                path = f"{self.path}/{body['metadata']['name']}"
                cluster.created_while.append(sorted(cluster.objects))
                cluster.objects[path] = body
                return self._send(201, body)

        return Handler


@pytest.fixture
def fake_cluster(monkeypatch):
    cluster = FakeCluster()
    server = ThreadingHTTPServer(("127.0.0.1", 0), cluster.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = client.Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")
    api = client.ApiClient(config)
    monkeypatch.setattr(
        train,
        "kubernetes_apis",
        lambda context: (client.CustomObjectsApi(api), client.CoreV1Api(api)),
    )
    monkeypatch.setattr(train, "POLL_S", 0.01)
    yield cluster
    server.shutdown()
    api.close()


def test_rerun_waits_for_the_job_its_service_and_configmap_before_creating(
    fake_cluster, project, mlp
):
    fake_cluster.put_job("bert-pretrain")
    result = mlp("--cdk-json", project, "train", "rerun", "bert-pretrain")
    assert result.code == 0, result.err
    deletes = [p for m, p in fake_cluster.requests if m == "DELETE"]
    assert deletes == [f"{JOBS}/bert-pretrain?propagationPolicy=Foreground"]
    # The job was created once nothing of the old one was left.
    assert fake_cluster.created_while == [[]]
    created = fake_cluster.objects[f"{JOBS}/bert-pretrain"]
    assert created["spec"]["plugins"]["svc"] == ["--publish-not-ready-addresses"]
    assert created["metadata"]["namespace"] == NS
    polls = [p for m, p in fake_cluster.requests if m == "GET" and "configmaps" in p]
    assert len(polls) >= fake_cluster.linger["configmaps"]
    assert "deleted vcjob/bert-pretrain, svc/bert-pretrain and cm/bert-pretrain-svc" in result.out


def test_rerun_gives_up_naming_what_is_left(fake_cluster, project, mlp):
    fake_cluster.put_job("bert-pretrain")
    fake_cluster.linger["configmaps"] = 10**6  # the garbage collector never gets there
    result = mlp("--cdk-json", project, "train", "rerun", "bert-pretrain", "--timeout", "0.2")
    assert result.code == 1
    assert (
        "bert-pretrain: still there after 0.2 s: vcjob/bert-pretrain, "
        "cm/bert-pretrain-svc" in result.err
    )
    assert fake_cluster.created_while == []  # nothing created on top of the old objects


def test_submit_refuses_while_the_old_objects_exist(fake_cluster, project, mlp):
    fake_cluster.put_job("bert-precompile")
    fake_cluster.objects.pop(f"{JOBS}/bert-precompile")  # job gone, svc and cm still there
    result = mlp("--cdk-json", project, "train", "submit", "bert-precompile")
    assert result.code == 1
    assert (
        "bert-precompile: svc/bert-precompile, cm/bert-precompile-svc already exist(s) in "
        "training; use `mlp train rerun bert-precompile`"
    ) in result.err
    assert fake_cluster.created_while == []


def test_submit_creates_a_new_job(fake_cluster, project, mlp):
    result = mlp("--cdk-json", project, "train", "submit", "bert-precompile")
    assert result.code == 0, result.err
    job = fake_cluster.objects[f"{JOBS}/bert-precompile"]
    (task, *_) = job["spec"]["tasks"]
    assert "neuron_parallel_compile" in task["template"]["spec"]["containers"][0]["command"][2]


def test_status(fake_cluster, project, mlp):
    fake_cluster.put_job("bert-pretrain", phase="Restarting", retries=1)
    result = mlp("--cdk-json", project, "train", "status", "bert-pretrain", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out) == {
        "job": "bert-pretrain",
        "phase": "Restarting",
        "retries": 1,
        "running": 0,
        "pods": {"bert-pretrain-worker-0-0": "Running", "bert-pretrain-worker-1-0": "Running"},
    }


def test_unknown_job(project, mlp):
    result = mlp("--cdk-json", project, "train", "submit", "bert-large")
    assert result.code == 1
    assert (
        "'bert-large': not a training job of the platform; expected one of "
        "['bert-precompile', 'bert-pretrain']" in result.err
    )


def test_another_namespace_is_refused_naming_it(fake_cluster, project, mlp):
    """The jobs need fsx-claim, which only the training namespace holds; the cluster refuses
    them elsewhere too (tests/unit/k8s_charts/test_training_namespace.py)."""
    for command in ("submit", "rerun", "status"):
        result = mlp(
            "--cdk-json", project, "train", command, "bert-pretrain", "--namespace", "research"
        )
        assert result.code == 1
        assert (
            "--namespace research: the training jobs run only in namespace training "
            "(training.namespace), which holds the fsx-claim volume" in result.err
        )
    assert fake_cluster.objects == {}
    ok = mlp("--cdk-json", project, "train", "submit", "bert-pretrain", "--namespace", "training")
    assert ok.code == 0, ok.err
