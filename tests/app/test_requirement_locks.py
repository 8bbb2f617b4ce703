"""The hash-locked requirement files agree with the pins they are generated from, and `make`
installs only from them with --require-hashes.

A pin edited in a requirements*.txt without `make lock` fails here, before an install would
fail (or worse, an old lock would install the old version).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# lock -> the pin file `make lock` generates it from.
LOCKS = {
    "requirements.lock": "requirements.txt",
    "requirements-dev.lock": "requirements-dev.txt",
    "requirements-scan.lock": "requirements-scan.txt",
    "requirements-triton.lock": "requirements-triton.txt",  # the local Triton server's venv
}
_PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;#\\]+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]+)")


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def pins(path: Path) -> dict[str, str]:
    """name -> version of every pin in ``path`` and the files it includes with ``-r``."""
    out: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            out.update(pins(path.parent / line[3:].strip()))
        elif line:
            match = _PIN.fullmatch(line)
            assert match, f"{path.name}: {raw!r} is not an exact pin"
            out[_name(match[1])] = match[3]
    return out


def locked(path: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, sha256 hashes) of every requirement in a pip-compile lock."""
    out: dict[str, tuple[str, list[str]]] = {}
    current = None
    for line in path.read_text().splitlines():
        if line and not line[0].isspace() and not line.startswith(("#", "-")):
            match = _PIN.match(line)
            assert match, f"{path.name}: {line!r} is not an exact pin"
            current = _name(match[1])
            out[current] = (match[3], [])
        for digest in _HASH.findall(line):
            assert current is not None
            out[current][1].append(digest)
    return out


def _same_version(pinned: str, locked_version: str) -> bool:
    # PEP 440: `==2.13.0` matches the local build `2.13.0+cpu` (torch's CPU wheel).
    return locked_version == pinned or locked_version.split("+", 1)[0] == pinned


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_each_lock_pins_exactly_its_requirements_with_hashes(lock: str) -> None:
    source = LOCKS[lock]
    want = pins(ROOT / source)
    have = locked(ROOT / lock)
    assert f"--output-file={lock} {source}" in (ROOT / lock).read_text(), "not made by make lock"
    missing = sorted(n for n in want if n not in have)
    assert missing == [], f"{lock}: run `make lock`; pinned in {source} but not locked: {missing}"
    stale = {n: (want[n], have[n][0]) for n in want if not _same_version(want[n], have[n][0])}
    assert stale == {}, f"{lock}: run `make lock`; (pinned, locked) differ: {stale}"
    unhashed = sorted(n for n, (_, hashes) in have.items() if not hashes)
    assert unhashed == []
    assert all(len(h) == 64 for _, hashes in have.values() for h in hashes)


def test_the_runtime_lock_is_the_dev_locks_subset_at_the_same_versions() -> None:
    """`make install-dev` installs requirements.lock, then requirements-dev.lock: a package at
    two versions would be installed twice and end at the dev one."""
    runtime = locked(ROOT / "requirements.lock")
    dev = locked(ROOT / "requirements-dev.lock")
    differ = {n: (v, dev[n][0]) for n, (v, _) in runtime.items() if n in dev and dev[n][0] != v}
    # setuptools: the build backend at pyproject's pin in the runtime lock; torch (dev only)
    # accepts it too, so the dev lock stays on the same version.
    assert differ == {}
    assert set(runtime) <= set(dev)


def test_make_installs_only_hash_checked_locks() -> None:
    """Every `pip install -r` in the Makefile reads a .lock with --require-hashes, and the
    project itself is built with the locked setuptools (no isolated build env fetching an
    unhashed backend)."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    variables = dict(re.findall(r"^([A-Z_]+) :?= (.*)$", text, re.M))
    installs = []
    for line in text.splitlines():
        for name, value in variables.items():
            line = line.replace(f"$({name})", value)
        if "pip install" in line and not line.lstrip().startswith("#"):
            installs.append(line.strip())
    read = {re.search(r" -r (\S+)", i)[1]: i for i in installs if " -r " in i}
    # Every lock, each hash-checked; never the pin file a lock is made from.
    assert set(LOCKS) <= set(read)
    for lock in LOCKS:
        assert "--require-hashes" in read[lock], read[lock]
    assert not set(LOCKS.values()) & set(read), "install the .lock, not the .txt"
    (editable,) = [i for i in installs if " -e ." in i]
    assert "--no-build-isolation" in editable and "--no-deps" in editable
    build_backend = re.search(
        r'requires = \["setuptools==([^"]+)"\]', (ROOT / "pyproject.toml").read_text()
    )[1]
    assert locked(ROOT / "requirements.lock")["setuptools"][0] == build_backend
