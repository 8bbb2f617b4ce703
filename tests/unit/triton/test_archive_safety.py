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


# Finding 6 (issue 34): tarfile reads a GNU long-name/long-link or PAX header whole into memory
# before anything looks at it, so a small gzip of a huge header cost hundreds of MiB. Observed
# here: the memory each reader allocates (tracemalloc) while refusing a crafted archive.
BOMB_BYTES = 64 * 1024**2  # a 64 MiB header, about 64 KiB gzipped


def _raw_header(name: str, kind: bytes, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def write_header_bomb(path: Path, kind: bytes, size: int = BOMB_BYTES) -> Path:
    """An archive whose first header is an extension header of ``size`` bytes (a valid PAX
    ``comment`` record, or a long name), then a good model folder: without a cap, tarfile
    reads it all and the archive passes as safe."""
    import gzip

    good = io.BytesIO()
    with tarfile.open(fileobj=good, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in good_members():
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    if kind in (tarfile.XHDTYPE, tarfile.XGLTYPE):
        head = f"{size} comment=".encode()
        tail = b"\n"
    else:  # a long name of 'a's, NUL-terminated
        head, tail = b"", b"\0"
    chunk = b"a" * (1 << 20)
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(_raw_header("././@Header", kind, size))
        left = size - len(head) - len(tail)
        out.write(head)
        while left > 0:
            out.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)
        out.write(tail + b"\0" * (-size % 512))
        out.write(good.getvalue())
    return path


HEADER_KINDS = {
    "pax extended": tarfile.XHDTYPE,
    "pax global": tarfile.XGLTYPE,
    "gnu long name": tarfile.GNUTYPE_LONGNAME,
    "gnu long link": tarfile.GNUTYPE_LONGLINK,
}


def _peak_bytes(call: Callable[[], object]) -> tuple[object, int]:
    import tracemalloc

    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module", params=sorted(HEADER_KINDS))
def header_bomb(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bomb") / "ens.tar.gz"
    return write_header_bomb(path, HEADER_KINDS[request.param])


def test_header_bomb_is_small_on_disk(header_bomb: Path) -> None:
    assert header_bomb.stat().st_size < 1024**2


def test_check_refuses_a_header_bomb_before_reading_it(header_bomb: Path) -> None:
    problems, peak = _peak_bytes(lambda: archive_safety.archive_safety_problems(header_bomb))
    assert peak < 4 * 1024**2, f"{peak} bytes allocated for a {BOMB_BYTES}-byte header"
    assert problems == [
        f"header at byte 0: {archive_safety._EXTENSION_NAMES[_kind(header_bomb)]} of "
        f"{BOMB_BYTES} bytes, above the cap of {archive_safety.MAX_HEADER_BYTES} bytes "
        "(refused before reading it)"
    ]


def _kind(path: Path) -> bytes:
    import gzip

    with gzip.open(path) as f:
        return f.read(512)[156:157]


def test_every_archive_reader_refuses_a_header_bomb_in_bounded_memory(
    header_bomb: Path, tmp_path: Path
) -> None:
    from ml_platform.training.dataset_extract import DATASET_CAPS
    from ml_platform.triton.execution_env import execution_env_problems
    from ml_platform.triton.repository import archive_gpu_target, archive_problems

    dest = tmp_path / "out"
    dest.mkdir()

    def refused(**caps: int) -> None:
        with pytest.raises(ArchiveSafetyError, match="above the cap"):
            extract_archive(header_bomb, dest, **caps)

    readers: dict[str, Callable[[], object]] = {
        "extract": refused,
        "dataset extract": lambda: refused(**DATASET_CAPS),
        "servability": lambda: archive_problems(header_bomb),
        "gpu target": lambda: archive_gpu_target(header_bomb),
        "execution env": lambda: execution_env_problems(header_bomb, "24.09"),
    }
    for name, reader in readers.items():
        _, peak = _peak_bytes(reader)
        assert peak < 4 * 1024**2, f"{name}: {peak} bytes for a {BOMB_BYTES}-byte header"
    assert _tree(dest) == []
    assert "above the cap" in " ".join(archive_problems(header_bomb))


def test_init_container_refuses_a_header_bomb_within_its_memory_limit(
    header_bomb: Path, tmp_path: Path
) -> None:
    """The pod's 512 Mi limit (k8s_charts/triton.py) as an address-space limit: the script
    refuses the archive, with a message, instead of dying or passing it."""
    import resource

    limit = 512 * 1024**2
    command = unpack_command([str(header_bomb)], dest=str(tmp_path))
    result = subprocess.run(
        [sys.executable, *command[1:]],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
    )
    assert result.returncode == 1
    assert "above the cap of 65536 bytes" in result.stderr and "Traceback" not in result.stderr


def test_headers_in_a_row_and_per_archive_are_capped(tmp_path: Path) -> None:
    """Many small headers: one member with five long-name headers, and an archive whose
    long names pass the per-archive sum (a cap lowered for the test)."""
    import gzip

    long_name = b"ens/" + b"a" * 200 + b"\0"
    stacked = tmp_path / "stacked.tar.gz"
    with gzip.open(stacked, "wb") as out:
        for _ in range(5):
            out.write(_raw_header("././@LongLink", tarfile.GNUTYPE_LONGNAME, len(long_name)))
            out.write(long_name + b"\0" * (-len(long_name) % 512))
        out.write(_raw_header("ens/x", tarfile.REGTYPE, 0) + b"\0" * 1024)
    assert archive_safety.archive_safety_problems(stacked) == [
        "header at byte 4096: more than 4 extension headers before one member "
        "(refused before reading it)"
    ]
    many = write_tar(
        tmp_path / "many.tar.gz",
        [*good_members(), *(_file(f"ens/{'b' * 150}{i}") for i in range(20))],
    )
    assert archive_safety.archive_safety_problems(many) == []
    problems = archive_safety.archive_safety_problems(many, max_header_total_bytes=1000)
    assert len(problems) == 1 and "pass the cap of 1000 bytes per archive" in problems[0]


def test_sparse_members_are_refused_before_their_maps_are_read(tmp_path: Path) -> None:
    pax_sparse = tmp_path / "pax_sparse.tar.gz"
    info = tarfile.TarInfo("ens/1/model.plan")
    info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0"}
    write_tar_format = tarfile.PAX_FORMAT
    with tarfile.open(pax_sparse, "w:gz", format=write_tar_format) as tar:
        for member, data in good_members():
            tar.addfile(member, io.BytesIO(data) if data is not None else None)
        tar.addfile(info, io.BytesIO(b""))
    problems = archive_safety.archive_safety_problems(pax_sparse)
    assert len(problems) == 1 and "a PAX sparse member" in problems[0]
