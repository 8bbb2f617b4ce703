"""What /proc says of a confined local server (issue 34, finding 5): read by the root and the
non-root tests of ``mlp models serve --local`` alike."""

from __future__ import annotations

from pathlib import Path

#: The only mounts a confined server may write: /tmp, /dev/shm and /dev's few devices.
CONFINED_WRITABLE = sorted(
    ["/dev", "/dev/full", "/dev/null", "/dev/random", "/dev/shm", "/dev/urandom", "/dev/zero"]
    + ["/proc", "/tmp"]
)


def proc_status(pid: int) -> dict[str, str]:
    """/proc/<pid>/status as a mapping (values as the kernel writes them, tabs kept)."""
    return dict(
        line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )


def mount_options(pid: int) -> dict[str, list[str]]:
    """Each mount point of ``pid`` (as it sees its root) with its per-mount options."""
    return {
        fields[4]: fields[5].split(",")
        for fields in (
            line.split() for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
        )
    }


def writable_mounts(pid: int) -> list[str]:
    return sorted(m for m, options in mount_options(pid).items() if "rw" in options)
