"""The table of ensemble kinds says what each builder builds, and the settings and the EKS
chart take their kinds from it (tests/unit/ml_platform_cli/test_kinds_cli.py: the CLI)."""

from __future__ import annotations

import pytest

from ml_platform.config import Settings
from ml_platform.k8s_charts.triton import models_to_load
from ml_platform.triton.archive_names import archive_file, logical_problem
from ml_platform.triton.kinds import (
    ARCHIVE_MODELS,
    BUILT_IN_ARCHIVES,
    IMAGE,
    KINDS,
    TEXT,
    EnsembleKind,
    archive_models,
    kind_named,
    kind_of_archive,
    kind_of_ensemble,
)
from ml_platform.triton.spec import EnsembleSpec
from ml_platform.triton.targets import GPU_TARGETS, text_logical_name
from tests.helpers.triton_support import MINILM_DIR, TENSORRT, Artifacts, write_artifacts


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Artifacts:
    return write_artifacts(tmp_path_factory.mktemp("kinds"))


def _built(kind: EnsembleKind, artifacts: Artifacts) -> list[EnsembleSpec]:
    """What the kind's builder builds from the fake artifacts: each variant of the kind."""
    if kind is IMAGE:
        return [kind.builder(classifier_path=artifacts.classifier, labels_path=artifacts.labels)]
    onnx = kind.builder(
        tokenizer_dir=MINILM_DIR, encoder_path=artifacts.onnx, encoder_format="onnx"
    )
    plans = [
        kind.builder(
            tokenizer_dir=MINILM_DIR,
            encoder_path=artifacts.plan,
            gpu_target=gpu,
            tensorrt_version=TENSORRT,
        )
        for gpu in GPU_TARGETS
    ]
    return [onnx, *plans]


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_each_row_describes_what_its_builder_builds(
    kind: EnsembleKind, artifacts: Artifacts
) -> None:
    specs = _built(kind, artifacts)
    assert sorted(spec.archive_filename for spec in specs) == sorted(
        archive_file(logical) for logical in kind.logical_names
    )
    for spec in specs:
        assert (spec.name, tuple(m.name for m in spec.models)) == (kind.ensemble, kind.steps)
        assert [(t.name, t.dtype) for t in spec.inputs] == [(kind.input.name, kind.input.dtype)]
        assert [t.name for t in spec.outputs] == [kind.output.name]
        assert ARCHIVE_MODELS[spec.archive_filename] == kind.models
        assert kind_of_ensemble(spec.name) is kind


def test_every_logical_name_is_valid_and_belongs_to_one_kind() -> None:
    names = [logical for kind in KINDS for logical in kind.logical_names]
    assert sorted(names) == list(BUILT_IN_ARCHIVES)
    assert [n for n in names if logical_problem(n)] == []
    assert len(set(names)) == len(names)
    assert {kind.name for kind in KINDS} == {"image", "text"}
    assert len({kind.ensemble for kind in KINDS}) == len(KINDS)  # serve tells them apart


def test_the_text_kind_has_one_archive_per_gpu_target_and_the_onnx_one() -> None:
    assert set(TEXT.logical_names) == {text_logical_name(None)} | {
        text_logical_name(gpu) for gpu in GPU_TARGETS
    }


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_lookups_by_reference_and_name(kind: EnsembleKind) -> None:
    for logical in kind.logical_names:
        assert kind_of_archive(logical) is kind
        assert kind_of_archive(f"{logical}@v0123abcd") is kind
        assert archive_models(logical) == kind.models
    assert kind_named(kind.name) is kind
    assert kind.default_archive in kind.logical_names
    assert kind.eks_default in kind.logical_names


def test_lookups_of_what_no_kind_builds() -> None:
    assert kind_of_archive("my_own_archive") is None
    assert kind_of_archive("Not A Reference") is None
    assert archive_models("model_tf_dali.tar.gz") is None  # a file name, not a reference
    assert kind_of_ensemble("my_ensemble") is None
    with pytest.raises(
        ValueError, match=r"ensemble kind 'audio': expected one of \['image', 'text'\]"
    ):
        kind_named("audio")


def test_the_settings_serve_one_archive_of_each_kind_by_default() -> None:
    settings = Settings.from_context({})
    for archives in (settings.inference.endpoints[0].archives, settings.triton_on_eks.archives):
        assert [kind_of_archive(a) for a in archives] == list(KINDS)
    assert models_to_load(settings.triton_on_eks.archives) == [
        model for kind in KINDS for model in kind.models
    ]


def test_the_table_is_data_below_the_settings_and_the_cli() -> None:
    """Layers read top-down: the settings import the table, so it must not import them (nor the
    constructs, the CLI, CDK or protobuf); a fresh interpreter shows what it loads."""
    import subprocess
    import sys

    layers_above = (
        "ml_platform.config",
        "ml_platform.constructs",
        "ml_platform.stacks",
        "ml_platform_cli",
        "aws_cdk",
        "cdk8s",
        "google.protobuf",
        "tritonclient",
    )
    code = (
        "import sys, ml_platform.triton.kinds; "
        f"print(sorted(m for m in sys.modules if m.startswith({layers_above!r})))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"
