"""The ensemble checker: each wiring mistake is reported with its step and tensor."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ml_platform.triton import (
    DataType,
    EnsembleSpec,
    EnsembleStep,
    EnsembleValidationError,
    ModelSpec,
    check_ensemble,
    find_ensemble_problems,
    write_repository,
)
from tests.helpers.triton_support import t, tiny_ensemble, tiny_models, tiny_steps


def problems_of(ensemble: EnsembleSpec) -> tuple[str, ...]:
    with pytest.raises(EnsembleValidationError) as info:
        check_ensemble(ensemble)
    assert isinstance(info.value, ValueError)
    for problem in info.value.problems:
        assert problem in str(info.value)
    return info.value.problems


def only(problems: tuple[str, ...]) -> str:
    assert len(problems) == 1, problems
    return problems[0]


def test_valid_ensemble_passes() -> None:
    assert find_ensemble_problems(tiny_ensemble()) == []
    check_ensemble(tiny_ensemble())


def test_missing_model_names_the_step() -> None:
    steps = tiny_steps()
    steps["enc"] = replace(steps["enc"], model_name="encoder-typo")
    found = problems_of(tiny_ensemble(steps=steps))
    assert any(
        "step 'encoder-typo'" in p and "not among the ensemble's models" in p for p in found
    ), found
    # Its output is then never produced, which the consumer step reports.
    assert any(
        "step 'post' input 'hidden'" in p and "'tokens' is never produced" in p for p in found
    ), found


def test_wrong_dtype_names_step_and_tensor() -> None:
    models = tiny_models()
    models["enc"] = replace(
        models["enc"], inputs=(t("ids", DataType.INT64, 16), t("mask", DataType.INT32, 16))
    )
    problem = only(problems_of(tiny_ensemble(models=models)))
    assert "step 'enc' input 'ids'" in problem
    assert "'token_ids'" in problem
    assert "INT64 here but INT32 from step 'pre' output 'IDS'" in problem


def test_wrong_dims_names_step_and_tensor() -> None:
    models = tiny_models()
    models["post"] = replace(
        models["post"], inputs=(t("hidden", DataType.FP32, 16, 4), t("mask", DataType.INT32, 16))
    )
    found = problems_of(tiny_ensemble(models=models))
    assert any(
        "step 'post' input 'hidden'" in p
        and "'tokens'" in p
        and "[-1, 16, 4]" in p
        and "[-1, 16, 8]" in p
        for p in found
    ), found


def test_variable_dims_match_any_size() -> None:
    models = tiny_models()
    models["enc"] = replace(
        models["enc"], inputs=(t("ids", DataType.INT32, -1), t("mask", DataType.INT32, 16))
    )
    assert find_ensemble_problems(tiny_ensemble(models=models)) == []
    models["enc"] = replace(
        models["enc"], inputs=(t("ids", DataType.INT32, -1, 16), t("mask", DataType.INT32, 16))
    )
    assert any(
        "'token_ids'" in p and "shape" in p
        for p in find_ensemble_problems(tiny_ensemble(models=models))
    )


def test_unmapped_required_input() -> None:
    steps = tiny_steps()
    steps["enc"] = replace(steps["enc"], input_map={"ids": "token_ids"})
    problem = only(problems_of(tiny_ensemble(steps=steps)))
    assert problem == "step 'enc': required input 'mask' is not mapped"


def test_optional_input_may_stay_unmapped() -> None:
    models = tiny_models()
    models["enc"] = replace(
        models["enc"],
        inputs=(t("ids", DataType.INT32, 16), t("mask", DataType.INT32, 16, optional=True)),
    )
    steps = tiny_steps()
    steps["enc"] = replace(steps["enc"], input_map={"ids": "token_ids"})
    assert find_ensemble_problems(tiny_ensemble(models=models, steps=steps)) == []


def test_map_keys_must_exist_on_the_model() -> None:
    steps = tiny_steps()
    steps["enc"] = replace(
        steps["enc"],
        input_map={"ids": "token_ids", "mask": "attn", "segment": "attn"},
        output_map={"hidden": "tokens", "logits": "x"},
    )
    found = problems_of(tiny_ensemble(steps=steps))
    assert any("step 'enc': input_map key 'segment' is not an input" in p for p in found)
    assert any("step 'enc': output_map key 'logits' is not an output" in p for p in found)
    assert len(found) == 2, found


def test_tensor_produced_twice() -> None:
    models = tiny_models()
    models["pre2"] = replace(models["pre"], name="pre2")
    steps = tiny_steps()
    steps["pre2"] = EnsembleStep("pre2", {"RAW": "TEXT"}, {"IDS": "token_ids"})
    problem = only(problems_of(tiny_ensemble(models=models, steps=steps)))
    assert "tensor 'token_ids' is produced 2 times" in problem
    assert "step 'pre' output 'IDS'" in problem and "step 'pre2' output 'IDS'" in problem


def test_step_overwriting_an_ensemble_input_is_produced_twice() -> None:
    steps = tiny_steps()
    steps["enc"] = replace(steps["enc"], output_map={"hidden": "tokens", "pooled": "TEXT"})
    found = problems_of(tiny_ensemble(steps=steps))
    assert any(
        "tensor 'TEXT' is produced 2 times" in p
        and "ensemble input" in p
        and "step 'enc' output 'pooled'" in p
        for p in found
    ), found


def test_ensemble_output_must_be_produced() -> None:
    steps = tiny_steps()
    steps["post"] = replace(steps["post"], output_map={"EMB": "embedding_typo"})
    problem = only(problems_of(tiny_ensemble(steps=steps)))
    assert problem == "ensemble output: tensor 'EMBEDDING' is never produced"


def test_ensemble_output_dtype_is_checked() -> None:
    ensemble = replace(tiny_ensemble(), outputs=(t("EMBEDDING", DataType.FP16, 8),))
    problem = only(problems_of(ensemble))
    assert "ensemble output: tensor 'EMBEDDING' is FP16 here but FP32 from step 'post'" in problem


def test_cycle_is_reported_with_steps_and_tensors() -> None:
    def model(name: str, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> ModelSpec:
        return ModelSpec(
            name=name,
            backend="python",
            max_batch_size=4,
            inputs=tuple(t(i, DataType.FP32, 2) for i in inputs),
            outputs=tuple(t(o, DataType.FP32, 2) for o in outputs),
        )

    ensemble = EnsembleSpec(
        name="loop",
        max_batch_size=4,
        inputs=(t("IN", DataType.FP32, 2),),
        outputs=(t("OUT", DataType.FP32, 2),),
        models=(
            model("a", ("x", "back"), ("y",)),
            model("b", ("y",), ("back", "out")),
            model("c", ("x",), ("z",)),
        ),
        steps=(
            EnsembleStep("a", {"x": "IN", "back": "loop_b"}, {"y": "loop_a"}),
            EnsembleStep("b", {"y": "loop_a"}, {"back": "loop_b", "out": "OUT"}),
            EnsembleStep("c", {"x": "IN"}, {"z": "unused"}),
        ),
    )
    problem = only(problems_of(ensemble))
    assert problem == (
        "cycle between steps: step 'a', step 'b' (through tensors ['loop_a', 'loop_b'])"
    )


def test_non_batching_model_in_batching_ensemble() -> None:
    models = tiny_models()
    models["enc"] = replace(
        models["enc"],
        max_batch_size=0,
        inputs=(t("ids", DataType.INT32, -1, 16), t("mask", DataType.INT32, -1, 16)),
        outputs=(t("hidden", DataType.FP32, -1, 16, 8), t("pooled", DataType.FP32, -1, 8)),
    )
    problem = only(problems_of(tiny_ensemble(models=models)))
    assert problem == (
        "step 'enc': model max_batch_size is 0 (no batching) but the ensemble batches up to 8"
    )


def test_model_batch_smaller_than_ensemble() -> None:
    models = tiny_models()
    models["post"] = replace(models["post"], max_batch_size=4)
    problem = only(problems_of(tiny_ensemble(models=models)))
    assert problem == "step 'post': model max_batch_size 4 is smaller than the ensemble's 8"


def test_non_batching_ensemble_compares_full_shapes() -> None:
    # Ensemble without batching, models with it: ensemble tensors carry the batch dim.
    ensemble = replace(
        tiny_ensemble(),
        max_batch_size=0,
        inputs=(t("TEXT", DataType.STRING, -1, 1),),
        outputs=(t("EMBEDDING", DataType.FP32, -1, 8),),
    )
    assert find_ensemble_problems(ensemble) == []
    broken = replace(ensemble, outputs=(t("EMBEDDING", DataType.FP32, 8),))
    assert any(
        "'EMBEDDING' has shape [8] here but [-1, 8]" in p for p in find_ensemble_problems(broken)
    )


def test_model_version_must_exist() -> None:
    steps = tiny_steps()
    steps["post"] = replace(steps["post"], model_version=3)
    problem = only(problems_of(tiny_ensemble(steps=steps)))
    assert problem == "step 'post': model_version=3 but the model has only version 1"


def test_duplicate_and_clashing_model_names() -> None:
    models = tiny_models()
    ensemble = replace(
        tiny_ensemble(),
        models=(*models.values(), models["pre"], replace(models["pre"], name="tiny")),
    )
    found = problems_of(ensemble)
    assert "model 'pre' is defined 2 times" in found
    assert "model 'tiny' has the same name as the ensemble" in found


def test_reports_several_problems_at_once_in_one_error() -> None:
    models = tiny_models()
    models["enc"] = replace(
        models["enc"],
        max_batch_size=4,
        inputs=(t("ids", DataType.INT64, 16), t("mask", DataType.INT32, 16)),
    )
    steps = tiny_steps()
    steps["post"] = replace(steps["post"], input_map={"hidden": "tokens"})
    steps["ghost"] = EnsembleStep("ghost", {"x": "TEXT"}, {"y": "z"})
    with pytest.raises(ValueError) as info:
        check_ensemble(tiny_ensemble(models=models, steps=steps))
    message = str(info.value)
    assert message.startswith("ensemble 'tiny' has 4 problem(s):")
    for expected in (
        "step 'ghost': model 'ghost' is not among",
        "step 'enc': model max_batch_size 4 is smaller",
        "step 'enc' input 'ids': tensor 'token_ids' is INT64 here",
        "step 'post': required input 'mask' is not mapped",
    ):
        assert expected in message, message


def test_checker_runs_before_anything_is_written(tmp_path) -> None:
    steps = tiny_steps()
    steps["enc"] = replace(steps["enc"], input_map={"ids": "token_ids"})
    with pytest.raises(EnsembleValidationError):
        write_repository(tiny_ensemble(steps=steps), tmp_path / "repo")
    assert not (tmp_path / "repo").exists()
