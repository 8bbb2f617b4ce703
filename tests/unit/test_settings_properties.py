"""Property: any single mutation of the default settings either validates or raises one
SettingsError naming the mutated key; nothing else (no traceback, no jsii error).

What is covered where:

- ``test_every_mutation_validates_or_names_the_key`` (Hypothesis, 400 derandomized cases, no
  database) mutates one place of the full default ``ml-platform`` object: a leaf, a list
  item, a list or a whole section is replaced by ``null``, a value of another JSON type, an
  out-of-bounds or boundary integer, NaN/infinity, or a tricky string (trailing newline,
  other scripts' digits, ``..`` and empty path segments, special-purpose CIDRs, IPv6,
  reserved namespaces and queues, colliding endpoint names, another partition's ARN, NUL,
  very long text, arbitrary text); or an unknown key is added to an object. It asserts on
  :meth:`Settings.from_context` (parsing and every check), not on synthesis, to stay within
  its time budget; ``null`` must give the same settings as leaving the key out.
- ``test_accepted_mutations_build_the_platform`` proves "validates => builds" for a handful
  of accepted, non-default values (combined into two settings objects): every stack's
  construct tree is built (which is where today's jsii errors came from) without app.synth.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ml_platform.config import Settings, SettingsError

AZ_KEY = "availability-zones:account=123456789012:region=us-west-2"
SEEDED = {AZ_KEY: ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"]}
CASES = 400


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


DEFAULT = _jsonable(Settings())


def _places(value: Any, path: tuple = ()) -> list[tuple]:
    """Every path in the default object: sections, leaves, lists and list items."""
    out = [path] if path else []
    if isinstance(value, dict):
        for key, inner in value.items():
            out += _places(inner, (*path, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            out += _places(inner, (*path, i))
    return out


PLACES = _places(DEFAULT)


def _get(value: Any, path: tuple) -> Any:
    for part in path:
        value = value[part]
    return value


OBJECT_PLACES = [p for p in [(), *PLACES] if isinstance(_get(DEFAULT, p), dict)]


def key_of(path: tuple) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


TRICKY_STRINGS = [
    "",
    " ",
    "\n",
    "x\n",
    "\t",
    "\x00",
    "é",
    "🙂",
    "x" * 300,
    "NaN",
    "null",
    "true",
    "1e3",
    # names Kubernetes, Volcano or the platform own; collisions of construct ids
    "default",
    "kube-system",
    "triton",
    "etcd",
    "root",
    "volcano-system",
    "triton--ensembles",
    "tritonEnsembles",
    "TRITON-ENSEMBLES",
    "model-bucket",
    "upload-archives",
    # paths
    "..",
    ".",
    "../",
    "/abs/",
    "models/../",
    "a//b/",
    "./models/",
    "models/",
    "a/b-c/",
    # CIDRs: special-purpose, host bits, IPv6, with a newline, valid ones
    "0.0.0.0/16",
    "224.0.0.0/16",
    "127.0.0.0/16",
    "169.254.0.0/16",
    "240.0.0.0/16",
    "10.0.0.1/16",
    "::/0",
    "2001:db8::/32",
    "10.0.0.0/16\n",
    "10.0.0.0/8",
    "100.64.0.0/16",
    "192.168.0.0/20",
    "203.0.113.0/24",
    "0.0.0.0/0",
    # ids and names with a trailing newline or other scripts' digits
    "123456789012\n",
    "١٢٣٤٥٦٧٨٩٠١٢",
    "210987654321",
    "us-west-2\n",
    "eu-west-1",
    "us-west-2a",
    "us-west-2c",
    "us-west-2e",
    # instance types aws-cdk cannot parse, Graviton, valid
    "foo.bar",
    "m6i.large\n",
    "m7g.large",
    "c7i.4xlarge",
    "trn1n.32xlarge",
    "trn2u.48xlarge",
    "ml.g5.xlarge",
    "g5.xlarge",
    "p4d.24xlarge",
    # ARNs
    "arn:aws-cn:iam::123456789012:role/x",
    "arn:aws:iam::123456789012:role/x",
    "arn:aws:iam::123456789012:user/x",
    # allowed alternatives of enumerations
    "private",
    "public_and_private",
    "destroy",
    "retain",
    "1.35",
    "24.09",
    "model_tf_dali.tar.gz",
    "model_trt_python.tar.gz",
    "model_trt_python_t4.tar.gz",
    "x.tar.gz",
    "../x.tar.gz",
]

BOUNDARY_INTS = [
    -(2**63),
    -1,
    0,
    1,
    2,
    3,
    10,
    11,
    20,
    21,
    50,
    51,
    64,
    65,
    100,
    101,
    125,
    1000,
    1001,
    1200,
    2400,
    16384,
    16385,
    100_000,
    2**31,
    2**63,
    10**30,
]

replacement_values = st.one_of(
    st.none(),
    st.sampled_from(TRICKY_STRINGS),
    st.text(max_size=24),
    st.sampled_from(BOUNDARY_INTS),
    st.integers(min_value=-5, max_value=5000),
    st.sampled_from([math.nan, math.inf, -math.inf, 1.5, 2.0]),
    st.booleans(),
    st.lists(st.sampled_from(TRICKY_STRINGS), max_size=3),
    st.just([]),
    st.dictionaries(st.sampled_from(["x", "name", "cidr"]), st.integers(0, 3), max_size=2),
)


@st.composite
def mutations(draw: st.DrawFn) -> tuple[str, dict, str, Any]:
    """(kind, mutated object, mutated key, new value)."""
    mutated = copy.deepcopy(DEFAULT)
    if draw(st.integers(0, 9)) == 0:
        where = draw(st.sampled_from(OBJECT_PLACES))
        name = draw(st.sampled_from(["bogus", "Name", "cidr ", "nodes_", "x.y", ""]))
        target = _get(mutated, where)
        if name in target:
            name += "_unknown"
        target[name] = draw(replacement_values)
        return "unknown key", mutated, key_of((*where, name)), target[name]
    where = draw(st.sampled_from(PLACES))
    value = draw(replacement_values)
    _get(mutated, where[:-1])[where[-1]] = value
    return "replace", mutated, key_of(where), value


def _names(key: str, text: str) -> bool:
    return re.search(r"(?<![\w.\]])" + re.escape(key) + r"(?![\w])", text) is not None


def names_key(key: str, error: SettingsError) -> bool:
    """The error names ``key``, or the list it is an item of ('a.b[2]' -> 'a.b')."""
    candidates = [key]
    while candidates[-1].endswith("]"):
        candidates.append(candidates[-1][: candidates[-1].rindex("[")])
    return any(_names(k, p) for k in candidates for p in error.problems)


OUTCOMES: Counter = Counter()


@settings(
    max_examples=CASES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(mutations())
def _property(case: tuple[str, dict, str, Any]) -> None:
    kind, mutated, key, value = case
    OUTCOMES["cases"] += 1
    try:
        parsed = Settings.from_context(mutated, known_azs=SEEDED)
    except SettingsError as error:
        OUTCOMES["SettingsError"] += 1
        assert names_key(key, error), (key, value, error.problems)
        return
    OUTCOMES["validates"] += 1
    if value is None and kind == "replace" and not key.endswith("]"):
        # null == not set: the same settings as without the key
        without = copy.deepcopy(mutated)
        parts = re.findall(r"[^.\[\]]+|\[\d+\]", key)
        target = without
        for part in parts[:-1]:
            target = target[int(part[1:-1])] if part.startswith("[") else target[part]
        del target[parts[-1]]
        assert parsed == Settings.from_context(without, known_azs=SEEDED)


def test_every_mutation_validates_or_names_the_key() -> None:
    OUTCOMES.clear()
    _property()
    print(f"\nsettings property: {dict(OUTCOMES)}")
    assert OUTCOMES["cases"] >= 300
    assert OUTCOMES["validates"] > 0 and OUTCOMES["SettingsError"] > 0
    assert OUTCOMES["cases"] == OUTCOMES["validates"] + OUTCOMES["SettingsError"]


ACCEPTED = [
    {
        "network": {"cidr": "100.64.0.0/20", "nat_gateways": 3, "flow_log_retention_days": 1},
        "cluster": {
            "system_instance_type": "c7i.4xlarge",
            "endpoint_access": "private",
            "public_access_cidrs": [],
            "admin_role_arn": "arn:aws:iam::210987654321:role/a/B",
            "name": "x",
        },
        "storage": {"model_prefix": "a/b-c.d_e/", "removal_policy": "destroy"},
        "training": {"namespace": "ml-jobs-1", "queue": "q"},
        "inference": {
            "endpoints": [
                {"name": "a", "archives": ["x"]},
                {"name": "B" + "-c" * 31, "archives": ["d-e_f", "model_tf_dali@v0123abcd"]},
            ]
        },
        "triton_on_eks": {"archives": ["model_onnx_python"], "replicas": 20, "gpu_nodes": 20},
        "trainium": {"min_nodes": 0, "nodes": 0, "max_nodes": 64},
    },
    {
        "network": {"cidr": "192.168.0.0/16"},
        "cluster": {
            "public_access_cidrs": ["203.0.113.0/24", "198.51.100.7/32"],
            "system_nodes": 10,
            "endpoint_access": "public_and_private",
        },
        "features": {"inference": False, "triton_on_eks": False},
        "inference": {"endpoints": []},
        "storage": {"fsx_storage_gib": 2400, "ecr_max_images": 1000},
    },
]


@pytest.mark.parametrize("overrides", ACCEPTED, ids=["most-values", "features-off"])
def test_accepted_mutations_build_the_platform(overrides: dict) -> None:
    from ml_platform.app import build_platform, new_app
    from ml_platform.config import deep_merge

    settings_ = Settings.from_context(deep_merge(DEFAULT, overrides), known_azs=SEEDED)
    platform = build_platform(new_app(), settings_, nag=False)
    names = {s.node.id for s in platform.stacks}
    assert "MlPlatform-Network" in names and "MlPlatform-Storage" in names
    if settings_.features.inference:
        assert sorted(platform.inference.endpoints) == sorted(
            e.name for e in settings_.inference.endpoints
        )
    else:
        assert platform.inference is None
