"""The dataset Job's extract step: check the tarball's SHA-256, then unpack it with the
project's safe extractor into a folder of its own, all or nothing.

Runs in the Job's ``extract`` container as a non-root user, from a ConfigMap that holds this
file next to ``archive_safety.py`` (standard library only)::

    python3 -I /opt/dataset-tools/dataset_extract.py

Settings come from the environment: ``TARBALL`` (the downloaded file), ``DATASET_SHA256``
(``training.dataset_sha256``; empty: not pinned), ``DATASETS_DIR`` (where datasets live),
``DATASET_NAME`` (the tarball's top folder, which becomes ``DATASETS_DIR/DATASET_NAME``) and
``DONE_MARKER``.

- A digest that differs from the pinned one deletes the tarball (a retry downloads it again)
  and fails the Job. Without a pinned digest the Job prints the one it computed and warns: no
  public source states the tarball's SHA-256, so the first download is trusted on first use,
  and pinning the printed value makes every later copy checked.
- Members go through ``archive_safety.extract_archive`` (no links, devices, absolute or
  ``..`` names, setuid bits; files opened ``O_EXCL|O_NOFOLLOW``), with caps sized for a
  dataset, into ``DATASETS_DIR/.<name>.partial``, renamed into place when complete: an
  interrupted extraction is started again, never used half-way.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys

if __name__ == "__main__":  # in the pod: archive_safety.py is the file beside this one
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import archive_safety
else:
    from ml_platform.triton import archive_safety

#: Caps of a dataset tarball (tens of GB of HDF5 shards), instead of a model archive's.
DATASET_CAPS = {
    "max_total_bytes": 512 * 1024**3,
    "max_member_bytes": 64 * 1024**3,
    "max_members": 200_000,
    # extension headers (GNU long names, PAX records) of 200,000 members of ~300 characters
    "max_header_total_bytes": 64 * 1024**2,
}
_SHA256 = re.compile(r"[0-9a-f]{64}")


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def prepare(
    *, tarball: str, expected_sha256: str, datasets_dir: str, name: str, marker: str
) -> int:
    """Verify and unpack; 0 on success (or when already done), 1 with a message otherwise."""
    target = os.path.join(datasets_dir, name)
    if os.path.exists(marker):
        print(f"already extracted: {target}")
        return 0
    if expected_sha256 and not _SHA256.fullmatch(expected_sha256):
        print(f"DATASET_SHA256 = {expected_sha256!r}: expected 64 lower-case hex digits",
              file=sys.stderr)
        return 1
    digest = sha256_of(tarball)
    if expected_sha256 and digest != expected_sha256:
        os.remove(tarball)
        print(f"{tarball}: SHA-256 {digest}, expected {expected_sha256} "
              "(training.dataset_sha256); deleted it, a retry downloads it again",
              file=sys.stderr)
        return 1
    if expected_sha256:
        print(f"{tarball}: SHA-256 {digest} matches training.dataset_sha256")
    else:
        print(f"WARNING: {tarball} is not verified: training.dataset_sha256 is not set. Its "
              f"SHA-256 is {digest}; set training.dataset_sha256 to it to check every later "
              "copy.")
    partial = os.path.join(datasets_dir, f".{name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial, mode=0o755)
    try:
        folders = archive_safety.extract_archive(tarball, partial, **DATASET_CAPS)
    except archive_safety.ArchiveSafetyError as error:
        shutil.rmtree(partial, ignore_errors=True)
        print(f"refusing to unpack: {error}", file=sys.stderr)
        return 1
    if name not in folders:
        shutil.rmtree(partial, ignore_errors=True)
        print(f"{tarball}: expected the folder {name!r} at its root, found {folders}",
              file=sys.stderr)
        return 1
    if os.path.exists(target):  # a run that stopped between the rename and the marker
        shutil.rmtree(target)
    os.rename(os.path.join(partial, name), target)
    shutil.rmtree(partial)
    with open(marker, "w", encoding="utf-8") as f:
        f.write(digest + "\n")
    os.remove(tarball)
    print(f"dataset ready: {target}")
    return 0


def main() -> int:
    env = os.environ
    return prepare(
        tarball=env["TARBALL"],
        expected_sha256=env.get("DATASET_SHA256", ""),
        datasets_dir=env["DATASETS_DIR"],
        name=env["DATASET_NAME"],
        marker=env["DONE_MARKER"],
    )


if __name__ == "__main__":
    sys.exit(main())
