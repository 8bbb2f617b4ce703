"""The Triton pods' archive fetch, run for real: the init container's shell script with the
AWS CLI against a local moto server, then the unpack container's command on what it fetched.

The fetch must refuse, before it writes anything, an object above the size cap, one without
the SHA-256 that ``mlp models upload`` records, or one whose recorded digest does not start
with the version its key names; and after the download, bytes that do not hash to that digest.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from ml_platform.k8s_charts.triton import fetch_command, unpack_command
from ml_platform.triton.archive_names import SHA256_METADATA, content_version
from tests.local_moto import moto_server

AWS = shutil.which("aws")
pytestmark = pytest.mark.skipif(AWS is None, reason="the AWS CLI is not installed")
BUCKET = "models-bucket"


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory):
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with moto_server(log) as (url, _port):
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(
            {
                "AWS_ENDPOINT_URL": url,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-west-2",
                "AWS_CONFIG_FILE": os.devnull,
                "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            }
        )
        s3 = boto3.client(
            "s3",
            endpoint_url=url,
            region_name="us-west-2",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        s3.create_bucket(
            Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
        )
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        yield s3, env


def archive(tmp_path: Path, name: str = "a") -> bytes:
    from tests.helpers.cli import ENSEMBLE, MODEL, write_tar

    path = tmp_path / f"{name}.tar.gz"
    write_tar(path, {"ensemble/config.pbtxt": ENSEMBLE, f"encoder_{name}/config.pbtxt": MODEL})
    return path.read_bytes()


def publish(
    s3, logical: str, data: bytes, *, digest: str | None = "auto", version: str | None = None
) -> str:
    """Put ``data`` as ``mlp models upload`` does (key from its content, sha256 metadata),
    or with the given digest/version to play a writer that lies."""
    key = f"models/{logical}-{version or content_version(data)}.tar.gz"
    full = hashlib.sha256(data).hexdigest() if digest == "auto" else digest
    s3.put_object(
        Bucket=BUCKET, Key=key, Body=data, Metadata={SHA256_METADATA: full} if full else {}
    )
    return key


def fetch(env: dict, dest: Path, archive_ref: str, **kwargs) -> subprocess.CompletedProcess:
    script = fetch_command(BUCKET, "models/", archive_ref, archive_dir=str(dest), **kwargs)
    return subprocess.run(
        ["sh", "-ec", script], env=env, capture_output=True, text=True, timeout=120
    )


def test_the_newest_version_is_fetched_verified_and_unpacks(cloud, tmp_path: Path) -> None:
    s3, env = cloud
    old = archive(tmp_path, "old")
    publish(s3, "model_tf_dali", old)
    time.sleep(1.1)  # S3 LastModified has one-second resolution
    new = archive(tmp_path, "new")
    key = publish(s3, "model_tf_dali", new)
    # Names that start the same, and a non-archive, are not versions of model_tf_dali.
    publish(s3, "model_tf_dali-vision", archive(tmp_path, "vision"))
    s3.put_object(Bucket=BUCKET, Key="models/model_tf_dali-v22222222.tar.gz.tmp", Body=b"x")
    dest = tmp_path / "archives"
    dest.mkdir()
    done = fetch(env, dest, "model_tf_dali")
    assert done.returncode == 0, done.stderr
    assert (dest / "model_tf_dali.tar.gz").read_bytes() == new
    # The unpack container's exact command, on the fetched file.
    models = tmp_path / "models"
    models.mkdir()
    unpacked = subprocess.run(
        [
            sys.executable if shutil.which("python3") is None else "python3",
            *unpack_command([str(dest / "model_tf_dali.tar.gz")], dest=str(models))[1:],
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert unpacked.returncode == 0, unpacked.stderr
    assert sorted(p.name for p in models.iterdir()) == ["encoder_new", "ensemble"]
    assert key.endswith(f"{content_version(new)}.tar.gz")


@pytest.mark.parametrize(
    "case",
    [
        "no digest recorded",
        "digest of another version",
        "bytes differ from the digest",
        "above the size cap",
    ],
)
def test_a_bad_object_is_refused_and_nothing_is_left(cloud, tmp_path: Path, case: str) -> None:
    s3, env = cloud
    data = archive(tmp_path, case.split()[0])
    true_version = content_version(data)
    kwargs = {}
    if case == "no digest recorded":  # e.g. put by a tool other than mlp models upload
        key = publish(s3, "m_nodigest", data, digest=None)
        expected = "no sha256 metadata recorded by mlp models upload (found None)"
    elif case == "digest of another version":
        key = publish(s3, "m_otherdigest", data, digest="ab" * 32)
        expected = f"its sha256 {'ab' * 32} does not start with the version {true_version}"
    elif case == "bytes differ from the digest":  # name and metadata of a real archive, other bytes
        key = publish(
            s3,
            "m_tampered",
            data + b"\0",
            digest=hashlib.sha256(data).hexdigest(),
            version=true_version,
        )
        expected = f"downloaded bytes do not match its sha256 {hashlib.sha256(data).hexdigest()}"
    else:
        key = publish(s3, "m_large", data)
        kwargs = {"max_bytes": len(data) - 1}
        expected = f"{len(data)} bytes, above the cap of {len(data) - 1}"
    dest = tmp_path / "archives"
    dest.mkdir()
    ref = key.removeprefix("models/").removesuffix(".tar.gz").replace("-v", "@v")
    done = fetch(env, dest, ref, **kwargs)
    assert done.returncode != 0
    assert f"s3://{BUCKET}/{key}: {expected}" in done.stderr
    assert list(dest.iterdir()) == []
