"""The versioned archive-name contract shared by packaging, settings, IAM and the CLI."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ml_platform.triton.archive_names import (
    ArchiveRef,
    content_version,
    logical_problem,
    parse_key,
    parse_ref,
    versioned_key,
)


def test_content_version_is_the_sha256_prefix_for_bytes_and_files(tmp_path: Path) -> None:
    data = b"archive bytes"
    expected = "v" + hashlib.sha256(data).hexdigest()[:8]
    path = tmp_path / "a.tar.gz"
    path.write_bytes(data)
    assert content_version(data) == expected
    assert content_version(path) == expected
    assert content_version(b"other bytes") != expected


def test_key_round_trip() -> None:
    key = versioned_key("model_trt_python", "v0123abcd")
    assert key == "model_trt_python-v0123abcd.tar.gz"
    assert parse_key(key) == ArchiveRef("model_trt_python", "v0123abcd")
    # a logical name may itself contain '-v' followed by hex: the version is the last part
    assert parse_key("m-vdeadbeef-v0123abcd.tar.gz") == ArchiveRef("m-vdeadbeef", "v0123abcd")


@pytest.mark.parametrize(
    "key",
    [
        "model_trt_python.tar.gz",  # unversioned
        "model-v0123abc.tar.gz",  # 7 hex digits
        "model-v0123ABCD.tar.gz",  # upper-case hex
        "model-v0123abcd.tgz",
        "../model-v0123abcd.tar.gz",
        "Model-v0123abcd.tar.gz",
    ],
)
def test_parse_key_rejects_what_is_not_a_versioned_key(key: str) -> None:
    assert parse_key(key) is None


def test_refs_and_patterns() -> None:
    any_version = parse_ref("model_tf_dali")
    pinned = parse_ref("model_tf_dali@v0123abcd")
    assert any_version == ArchiveRef("model_tf_dali", None)
    assert str(pinned) == "model_tf_dali@v0123abcd"
    assert any_version.key_pattern == "model_tf_dali-v*.tar.gz"
    assert pinned.key_pattern == "model_tf_dali-v0123abcd.tar.gz"
    assert any_version.matches("model_tf_dali-v99999999.tar.gz")
    assert not any_version.matches("model_tf_dali_x-v99999999.tar.gz")
    assert not pinned.matches("model_tf_dali-v99999999.tar.gz")
    with pytest.raises(ValueError, match="names no version"):
        _ = any_version.key


@pytest.mark.parametrize("text", ["", "Model", "a@v123", "a@0123abcd", "a/b", "-a", "a-", 3, None])
def test_parse_ref_rejects_with_the_allowed_form(text: object) -> None:
    with pytest.raises(ValueError, match="expected NAME or NAME@vXXXXXXXX"):
        parse_ref(text)


def test_logical_problem_and_versioned_key_checks() -> None:
    assert logical_problem("model_trt_python") is None
    assert "not a logical archive name" in logical_problem("has space")
    with pytest.raises(ValueError, match="not an archive version"):
        versioned_key("model", "vXYZ")
