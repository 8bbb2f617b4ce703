"""The one place a construct's props problems become its ValueError."""

from __future__ import annotations

import aws_cdk as cdk
import pytest

from ml_platform.app import new_app
from ml_platform.constructs._props import raise_problems


def test_every_problem_is_raised_once_under_the_constructs_path() -> None:
    scope = cdk.Stack(new_app(), "S")
    raise_problems(scope, [])  # nothing wrong: no error
    with pytest.raises(ValueError) as info:
        raise_problems(scope, ["a=1: expected 2", "b='x': expected one of ['y']"])
    assert str(info.value) == "S: a=1: expected 2; b='x': expected one of ['y']"
