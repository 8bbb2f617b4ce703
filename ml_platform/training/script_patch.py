"""A timeout for the BERT sample's two instance-metadata calls, applied in the image build.

The pinned script names its TensorBoard run after the instance type, which rank 0 asks the
instance metadata service for (``Logger.get_instance_type``: a ``PUT`` for a token, then a
``GET``) with ``requests`` and no timeout. A training pod cannot reach IMDS: every node's hop
limit is 1 (``ml_platform.constructs._nodegroup.IMDS_HOP_LIMIT``, so the answer never crosses
into the pod) and the training namespace's NetworkPolicies deny link-local egress. Without a
timeout rank 0 waits on the dropped answer at every start while 63 workers wait for it. With
:data:`TIMEOUT_S` the call fails at once into the script's own fallback (the pod's host
name). ``requests`` waits forever unless given a timeout
(https://requests.readthedocs.io/en/latest/user/advanced/#timeouts).

Run in the build (``Dockerfile``) as ``python3 script_patch.py <script>``: each call must be
found exactly once, or the build fails; the patched file must hash to
:data:`PATCHED_SHA256` (of the script at ``NEURON_SAMPLES_COMMIT``, patched here).
Standard library only: it runs in the base image before anything is installed.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

TIMEOUT_S = 2
"""Seconds per metadata call; IMDS answers in milliseconds where it is reachable."""

# The end of each call in the pinned script, and the same with the timeout.
CALLS = (
    '"X-aws-ec2-metadata-token-ttl-seconds": "21600"})',
    '"X-aws-ec2-metadata-token": token.text})',
)
PATCHED_SHA256 = "2544d8ff25f8be1f9059a057412522e4f6c384620c1e9f1aba82f01ee01a7c8e"
"""sha256 of ``dp_bert_large_hf_pretrain_hdf5.py`` at ``NEURON_SAMPLES_COMMIT`` after
:func:`patch` (computed from that file)."""


def patch(text: str) -> str:
    """``text`` with ``timeout=TIMEOUT_S`` added to each of :data:`CALLS`.

    Raises:
        ValueError: naming a call that is not found exactly once.
    """
    for call in CALLS:
        count = text.count(call)
        if count != 1:
            raise ValueError(
                f"script_patch: {call!r} found {count} times, expected once: the script "
                "changed; review the metadata calls and this patch"
            )
        text = text.replace(call, call[:-1] + f", timeout={TIMEOUT_S})")
    return text


def main(argv: list[str]) -> int:
    (path,) = argv
    script = Path(path)
    try:
        patched = patch(script.read_text(encoding="utf-8"))
    except ValueError as error:
        print(error, file=sys.stderr)
        return 1
    digest = hashlib.sha256(patched.encode("utf-8")).hexdigest()
    if digest != PATCHED_SHA256:
        print(f"script_patch: patched {path} has sha256 {digest}, expected {PATCHED_SHA256}")
        return 1
    script.write_text(patched, encoding="utf-8")
    print(f"script_patch: {path}: metadata calls time out after {TIMEOUT_S} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
