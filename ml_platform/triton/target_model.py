"""What a SageMaker ``TargetModel`` (an archive key under the endpoint's prefix) may be.

Kept free of heavy imports: settings validation and the operator CLI use it without
loading protobuf or tritonclient.
"""

from __future__ import annotations

import re

#: Longest ``TargetModel`` SageMaker's InvokeEndpoint accepts.
TARGET_MODEL_MAX_LENGTH = 1024
#: Suffix SageMaker multi-model endpoints expect of each model archive.
ARCHIVE_SUFFIX = ".tar.gz"

# One path segment: S3-safe characters that are also literal in IAM condition patterns
# (no '*' or '?'), so `sagemaker:TargetModel` conditions can name the archive exactly.
_SEGMENT = re.compile(r"^[A-Za-z0-9._-]+$")


def validate_target_model(name: str) -> str | None:
    """Check ``name`` as a SageMaker ``TargetModel`` (an archive key under the prefix).

    Rules: not empty; at most ``TARGET_MODEL_MAX_LENGTH`` characters; relative (no
    leading ``/``); ``/``-separated segments made of letters, digits, ``.``, ``_`` and
    ``-``, none empty, ``.`` or ``..``; ends with ``.tar.gz`` after a non-empty stem.

    Returns:
        ``None`` when valid, otherwise one message listing every broken rule.
    """
    if not isinstance(name, str) or not name:
        return "TargetModel must be a non-empty string"
    errors: list[str] = []
    if len(name) > TARGET_MODEL_MAX_LENGTH:
        errors.append(f"is {len(name)} characters long (at most {TARGET_MODEL_MAX_LENGTH})")
    if name.startswith("/"):
        errors.append("must be relative to the endpoint's S3 prefix (no leading '/')")
    segments = name.strip("/").split("/")
    if any(s in ("", ".", "..") for s in segments):
        errors.append("has an empty, '.' or '..' path segment")
    bad = sorted({c for c in name if c != "/" and not _SEGMENT.match(c)})
    if bad:
        errors.append(f"has characters outside [A-Za-z0-9._-/]: {''.join(bad)!r}")
    if not name.endswith(ARCHIVE_SUFFIX) or segments[-1] == ARCHIVE_SUFFIX:
        errors.append(f"must end with a file name ending in {ARCHIVE_SUFFIX!r}")
    if not errors:
        return None
    return f"TargetModel {name[:80]!r}: " + "; ".join(errors)
