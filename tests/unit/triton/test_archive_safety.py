"""Archives cannot escape: the safety module refuses every unsafe member, and the Triton init
container's unpack command (run here, as the pod runs it) writes nothing from such archives."""

from __future__ import annotations

import ast
import io
import os
import stat
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ml_platform.k8s_charts.triton import unpack_command
from ml_platform.triton import archive_safety
from ml_platform.triton.archive_safety import (
    MAX_MEMBER_BYTES,
    ArchiveSafetyError,
    check_archive,
    extract_archive,
)

CONFIG = b'name: "m"\nplatform: "ensemble"\n'


def _file(name: str, data: bytes = b"x", mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    return info, data


def _special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info, None


def write_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def good_members(model: str = "ens") -> list:
    folder = tarfile.TarInfo(f"{model}/")
    folder.type = tarfile.DIRTYPE
    return [
        (folder, None),
        _file(f"{model}/config.pbtxt", CONFIG),
        _file(f"{model}/1/model.py", b"pass\n"),
    ]


def huge_member() -> list:
    info = tarfile.TarInfo("ens/1/model.plan")
    info.size = MAX_MEMBER_BYTES + 1  # header only: the check reads headers, never the data
    return [(info, None)]


# (case, members, the member the error must name, words of the reason)
MALICIOUS: list[tuple[str, Callable[[], list], str, str]] = [
    ("dotdot", lambda: [*good_members(), _file("ens/../../evil.sh")], "ens/../../evil.sh", "'..'"),
    (
        "absolute",
        lambda: [*good_members(), _file("/etc/cron.d/evil")],
        "/etc/cron.d/evil",
        "absolute",
    ),
    (
        "symlink to /etc/passwd",
        lambda: [*good_members(), _special("ens/passwd", tarfile.SYMTYPE, "/etc/passwd")],
        "ens/passwd",
        "symbolic link",
    ),
    (
        "directory symlink then file through it",
        lambda: [
            *good_members(),
            _special("ens/out", tarfile.SYMTYPE, "/tmp"),
            _file("ens/out/evil.sh"),
        ],
        "ens/out",
        "symbolic link",
    ),
    (
        "hardlink",
        lambda: [*good_members(), _special("ens/shadow", tarfile.LNKTYPE, "/etc/shadow")],
        "ens/shadow",
        "hard link",
    ),
    (
        "char device",
        lambda: [*good_members(), _special("ens/null", tarfile.CHRTYPE)],
        "ens/null",
        "character device",
    ),
    (
        "block device",
        lambda: [*good_members(), _special("ens/sda", tarfile.BLKTYPE)],
        "ens/sda",
        "block device",
    ),
    ("fifo", lambda: [*good_members(), _special("ens/pipe", tarfile.FIFOTYPE)], "ens/pipe", "FIFO"),
    ("file at the root", lambda: [*good_members(), _file("README")], "README", "archive root"),
    ("setuid", lambda: [*good_members(), _file("ens/1/run", b"x", 0o4755)], "ens/1/run", "setuid"),
    ("backslash", lambda: [*good_members(), _file("ens\\..\\evil")], "ens\\..\\evil", "backslash"),
    (
        "duplicate",
        lambda: [*good_members(), _file("ens/config.pbtxt", b"other")],
        "ens/config.pbtxt",
        "more than once",
    ),
    ("oversized member", lambda: [*good_members(), *huge_member()], "ens/1/model.plan", "cap"),
]


@pytest.mark.parametrize(
    ("case", "members", "member", "reason"), MALICIOUS, ids=[m[0] for m in MALICIOUS]
)
def test_each_unsafe_member_is_refused_by_name(
    tmp_path: Path, case: str, members: Callable[[], list], member: str, reason: str
) -> None:
    archive = write_tar(tmp_path / "bad.tar.gz", members())
    with pytest.raises(ArchiveSafetyError) as info:
        check_archive(archive)
    message = str(info.value)
    assert f"member {member!r}" in message and reason in message, message
    assert message.startswith(str(archive))


def test_total_size_cap_stops_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive_safety, "MAX_TOTAL_BYTES", 40)
    archive = write_tar(tmp_path / "big.tar.gz", [*good_members(), _file("ens/1/w", b"0" * 11)])
    with pytest.raises(
        ArchiveSafetyError, match=r"member 'ens/1/w': unpacked size passes the cap of 40"
    ):
        check_archive(archive)


def test_not_a_tar_and_no_model_folder_are_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not gzip")
    with pytest.raises(ArchiveSafetyError, match="not a readable tar archive"):
        check_archive(junk)
    empty = write_tar(tmp_path / "empty.tar.gz", [])
    with pytest.raises(ArchiveSafetyError, match="holds no model folder"):
        check_archive(empty)


def test_archives_the_packager_writes_pass(tmp_path: Path) -> None:
    """'./'-prefixed names (``tar -C dir .``) and plain folders are fine."""
    dot = tarfile.TarInfo(".")
    dot.type = tarfile.DIRTYPE
    archive = write_tar(tmp_path / "ok.tar.gz", [(dot, None), *good_members("./ens")])
    check_archive(archive)
    out = tmp_path / "out"
    out.mkdir()
    assert extract_archive(archive, out) == ["ens"]
    assert (out / "ens" / "config.pbtxt").read_bytes() == CONFIG


def _run_unpack(dest: Path, *archives: Path) -> subprocess.CompletedProcess:
    """The init container's command, with this interpreter standing in for the image's."""
    command = unpack_command([str(a) for a in archives], dest=str(dest))
    assert command[0] == "python3"
    return subprocess.run(
        [sys.executable, *command[1:]], capture_output=True, text=True, timeout=60, cwd=dest
    )


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(
    ("case", "members", "member", "reason"), MALICIOUS, ids=[m[0] for m in MALICIOUS]
)
def test_init_container_script_writes_nothing_from_a_malicious_archive(
    tmp_path: Path, case: str, members: Callable[[], list], member: str, reason: str
) -> None:
    good = write_tar(tmp_path / "good.tar.gz", good_members("other"))
    bad = write_tar(tmp_path / "bad.tar.gz", members())
    dest = tmp_path / "models"
    dest.mkdir()
    result = _run_unpack(dest, good, bad)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"member {member!r}" in result.stderr and "Traceback" not in result.stderr
    assert _tree(dest) == []  # every archive is checked before any is unpacked
    assert not (tmp_path / "evil.sh").exists()


def test_init_container_script_unpacks_good_archives_exactly(tmp_path: Path) -> None:
    first = write_tar(tmp_path / "a.tar.gz", good_members("ens_a"))
    second = write_tar(tmp_path / "b.tar.gz", good_members("ens_b"))
    dest = tmp_path / "models"
    dest.mkdir()
    result = _run_unpack(dest, first, second)
    assert result.returncode == 0, result.stderr
    assert _tree(dest) == [
        "ens_a",
        "ens_a/1",
        "ens_a/1/model.py",
        "ens_a/config.pbtxt",
        "ens_b",
        "ens_b/1",
        "ens_b/1/model.py",
        "ens_b/config.pbtxt",
    ]
    assert (dest / "ens_a/config.pbtxt").read_bytes() == CONFIG
    mode = stat.S_IMODE((dest / "ens_a/1/model.py").stat().st_mode)
    assert mode & ~0o644 == 0


def test_init_container_script_refuses_two_archives_writing_one_folder(tmp_path: Path) -> None:
    first = write_tar(tmp_path / "a.tar.gz", good_members("ens"))
    second = write_tar(tmp_path / "b.tar.gz", good_members("ens"))
    dest = tmp_path / "models"
    dest.mkdir()
    result = _run_unpack(dest, first, second)
    assert result.returncode == 1
    assert "member 'ens/config.pbtxt': ens/config.pbtxt already exists" in result.stderr


def test_init_container_script_does_not_follow_a_link_already_in_models(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    dest = tmp_path / "models"
    (dest / "ens").mkdir(parents=True)
    os.symlink(outside, dest / "ens" / "config.pbtxt")
    result = _run_unpack(dest, write_tar(tmp_path / "a.tar.gz", good_members("ens")))
    assert result.returncode == 1
    assert outside.read_text() == "keep"


def test_safety_module_is_stdlib_only_python_3_10() -> None:
    """The Triton 24.09 image runs it with Ubuntu 22.04's Python 3.10 and nothing installed."""
    source = Path(archive_safety.__file__).read_text()
    tree = ast.parse(source, feature_version=(3, 10))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in (
            node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")]
        )
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
