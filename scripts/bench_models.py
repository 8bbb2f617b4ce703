#!/usr/bin/env python3
"""Archive operations at scale: package, upload, re-upload, list and status against a local
moto server, compared with a plain serial boto3 loop.

The script starts the CLI tests' moto server (``tests/local_moto.py``) on 127.0.0.1 (a random
free port), points every AWS client at it, and for 10, 100 and 1,000 small archives (each a
valid ensemble of a few KiB with its own content, so its own version) times:

* package: write the archive and give it its versioned name (``version_archive``, what
  ``mlp models package`` does after building);
* ``mlp models upload`` (``--concurrency``, default 16) into a fresh Storage stack;
* the same upload again (every archive skipped: same content there);
* a plain serial loop of ``put_object`` calls with the same files (the floor of any upload
  that sends one request per archive);
* ``mlp models list --json`` and ``mlp status`` of one endpoint.

Each is run with no added latency and with 50 ms added before every HTTP request (a botocore
``before-send`` hook, in ``mlp`` and in the serial loop alike), which is what a real region
away from the client looks like. Targets (issue #15): 1,000 archives upload in under 2x the
serial loop with no added latency, and at least 4x faster than it with 50 ms.

    .venv/bin/python scripts/bench_models.py [--counts 10 100 1000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REGION = "us-west-2"
LATENCY = 0.05


def isolate_aws(url: str, folder: Path) -> None:
    """Every boto3 client of this process talks to the local moto server, with fake keys."""
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        del os.environ[name]
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL": url,
            "AWS_CONFIG_FILE": str(folder / "none"),
            "AWS_SHARED_CREDENTIALS_FILE": str(folder / "none"),
            "AWS_EC2_METADATA_DISABLED": "true",
        }
    )


def add_latency(events, seconds: float) -> None:
    if seconds:
        events.register("before-send", lambda **_: time.sleep(seconds))


def package(folder: Path, count: int, tag: str) -> tuple[list[Path], float]:
    from ml_platform_cli.archives import version_archive
    from tests.helpers.cli import ENSEMBLE, MODEL  # the CLI tests' minimal valid ensemble

    folder.mkdir(parents=True)
    started = time.perf_counter()
    paths = []
    for i in range(count):
        path = folder / f"bench-{tag}-{i:05d}.tar.gz"
        with tarfile.open(path, "w:gz") as tar:
            for name, text in (
                ("ensemble/config.pbtxt", ENSEMBLE),
                ("encoder/config.pbtxt", MODEL),
                ("encoder/1/weights.txt", f"{tag} {i} " * 64),
            ):
                data = text.encode()
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        paths.append(version_archive(path)[0])
    return paths, time.perf_counter() - started


def storage_stack(cloudformation, prefix: str) -> str:
    template = {
        "Resources": {"Models": {"Type": "AWS::S3::Bucket"}},
        "Outputs": {
            "ModelBucketName": {"Value": {"Ref": "Models"}},
            "ModelPrefix": {"Value": "models/"},
        },
    }
    name = f"{prefix}-Storage"
    cloudformation.create_stack(StackName=name, TemplateBody=json.dumps(template))
    outputs = cloudformation.describe_stacks(StackName=name)["Stacks"][0]["Outputs"]
    return next(o["OutputValue"] for o in outputs if o["OutputKey"] == "ModelBucketName")


def mlp(latency: float, *argv: str) -> tuple[float, str]:
    """Run ``mlp`` in this process (stdout captured, stderr not a terminal); seconds, stdout."""
    from ml_platform_cli import main as cli
    from ml_platform_cli.aws import Context

    original = Context.session

    def session(self):
        fresh = self._session is None
        value = original(self)
        if fresh:
            add_latency(value.events, latency)
        return value

    out, err = io.StringIO(), io.StringIO()
    Context.session = session
    try:
        started = time.perf_counter()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["--cdk-json", str(ROOT / "cdk.json"), *argv])
        seconds = time.perf_counter() - started
    finally:
        Context.session = original
    if code != 0:
        raise RuntimeError(f"mlp {' '.join(argv)} failed: {err.getvalue()[-2000:]}")
    return seconds, out.getvalue()


def serial_loop(paths: list[Path], bucket: str, latency: float) -> float:
    import boto3

    session = boto3.Session()
    add_latency(session.events, latency)
    s3 = session.client("s3", region_name=REGION)
    started = time.perf_counter()
    for path in paths:
        with path.open("rb") as body:
            s3.put_object(Bucket=bucket, Key=f"models/{path.name}", Body=body)
    return time.perf_counter() - started


def endpoint(session_factory) -> str:
    """A SageMaker endpoint in moto for ``mlp status``."""
    sagemaker = session_factory().client("sagemaker", region_name=REGION)
    sagemaker.create_model(
        ModelName="bench",
        ExecutionRoleArn="arn:aws:iam::123456789012:role/bench",
        PrimaryContainer={"Image": "x", "Mode": "MultiModel", "ModelDataUrl": "s3://bench/models/"},
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName="bench",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "bench",
                "InitialInstanceCount": 1,
                "InstanceType": "ml.g4dn.4xlarge",
            }
        ],
    )
    sagemaker.create_endpoint(EndpointName="bench", EndpointConfigName="bench")
    return "bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latencies-ms", type=int, nargs="+", default=[0, 50])
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.local_moto import moto_server  # what the CLI tests start, too

    with (
        tempfile.TemporaryDirectory(prefix="bench-models-") as tmp,
        moto_server(Path(tmp) / "moto.log", timeout=30) as (url, _),
    ):
        isolate_aws(url, Path(tmp))
        import boto3

        cloudformation = boto3.client("cloudformation", region_name=REGION)
        name = endpoint(boto3.Session)
        rows = []
        for latency_ms in args.latencies_ms:
            latency = latency_ms / 1000
            for count in args.counts:
                tag = f"n{count}l{latency_ms}"
                paths, packaged = package(Path(tmp) / tag, count, tag)
                size = sum(p.stat().st_size for p in paths)
                prefix = f"Bench{tag.upper()}"
                storage_stack(cloudformation, prefix)
                upload_argv = ("--stack-prefix", prefix, "models", "upload")
                upload_argv += ("--concurrency", str(args.concurrency), str(paths[0].parent))
                upload, _ = mlp(latency, *upload_argv)
                again, _ = mlp(latency, *upload_argv)  # the same folder: every archive skipped
                listed_s, listed = mlp(
                    latency, "--stack-prefix", prefix, "models", "list", "--json"
                )
                assert len(json.loads(listed)["archives"]) == count
                serial_bucket = storage_stack(cloudformation, prefix + "S")
                serial = serial_loop(paths, serial_bucket, latency)
                status, _ = mlp(latency, "status", "--endpoint", name)
                rows.append(
                    (latency_ms, count, size, packaged, upload, again, serial, listed_s, status)
                )
                print(
                    f"  {latency_ms} ms x {count}: upload {upload:.2f} s, serial {serial:.2f} s",
                    file=sys.stderr,
                )
    print(
        f"moto server on 127.0.0.1, --concurrency {args.concurrency}; seconds (archives per second)"
    )
    header = (
        "latency",
        "archives",
        "MiB",
        "package",
        "mlp upload",
        "again (skip)",
        "serial loop",
        "upload/serial",
        "mlp list",
        "mlp status",
    )
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for lat, n, size, pkg, up, again, serial, listed, status in rows:
        print(
            f"| {lat} ms | {n:,} | {size / 2**20:.1f} | {pkg:.2f} | {up:.2f} ({n / up:,.0f}/s)"
            f" | {again:.2f} | {serial:.2f} ({n / serial:,.0f}/s) | {up / serial:.2f}x"
            f" | {listed:.2f} ({n / listed:,.0f}/s) | {status:.2f} |"
        )
    big = {r[0]: r for r in rows if r[1] == max(args.counts)}
    if 0 in big:
        ratio = big[0][4] / big[0][6]
        print(
            f"target, no added latency: upload within 2x the serial loop: {ratio:.2f}x "
            f"{'OK' if ratio < 2 else 'MISSED'}"
        )
    if 50 in big:
        speedup = big[50][6] / big[50][4]
        print(
            f"target, 50 ms latency: at least 4x faster than the serial loop: "
            f"{speedup:.1f}x {'OK' if speedup >= 4 else 'MISSED'}"
        )


if __name__ == "__main__":
    main()
