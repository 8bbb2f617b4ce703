"""No jsii struct is passed as a plain dict anywhere in ml_platform/.

Two nets for one bug class (a dict given where jsii expects a struct silently loses its
snake_case keys): the runtime guard of tests/jsii_guard.py fails every test that builds such a
construct, and the static scan below covers code no test reaches.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import Arn, ArnComponents, ArnFormat

from tests import jsii_guard
from tests.support import ROOT

JSII_PACKAGES = ("aws_cdk", "cdk8s", "cdk8s_plus_35", "constructs", "cdk_nag")


def _stack() -> cdk.Stack:
    from ml_platform.app import new_app

    env = cdk.Environment(account="123456789012", region="us-west-2")
    return cdk.Stack(new_app(), "S", env=env)


def test_the_guard_is_on_for_the_whole_session() -> None:
    assert jsii_guard.installed()


def test_the_guard_rejects_the_log_arn_bug() -> None:
    """Today's bug, replayed: Arn.format with a dict."""
    stack = _stack()
    components = {
        "service": "logs",
        "resource": "log-group",
        "resource_name": "/aws/sagemaker/Endpoints/ep:*",
        "arn_format": ArnFormat.COLON_RESOURCE_NAME,
    }
    with pytest.raises(jsii_guard.StructGivenAsDict, match=r"arn_format', 'resource_name'"):
        Arn.format(components, stack)  # type: ignore[arg-type]
    # Nested inside a list, too (props of props).
    with pytest.raises(jsii_guard.StructGivenAsDict):
        stack.node.add_metadata("m", [{"resource_name": "x"}])
    typed = Arn.format(ArnComponents(**components), stack)  # type: ignore[arg-type]
    assert stack.resolve(typed)["Fn::Join"][1][-1].endswith(
        ":log-group:/aws/sagemaker/Endpoints/ep:*"
    )


def _jsii_modules(trees: list[ast.Module]) -> set[str]:
    names = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.split(".")[0] in JSII_PACKAGES:
                    names.add(node.module)
                    names.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names if a.name.split(".")[0] in JSII_PACKAGES)
    return names


def test_no_dict_literal_carries_struct_fields_in_ml_platform() -> None:
    """Every dict literal (or dict(...) call) given as an argument in the modules of
    ml_platform/ that import jsii libraries is checked
    against the snake_case fields of the structs of the jsii modules ml_platform imports."""
    # the tooling beside the library too (the estimator reads CDK stacks at synth time)
    files = sorted(
        path
        for package in ("ml_platform", "ml_platform_cli", "ml_platform_pricing")
        for path in (ROOT / package).rglob("*.py")
    )
    trees = [ast.parse(path.read_text(), str(path)) for path in files]
    for name in _jsii_modules(trees):
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # a class imported from a module, not a module
    fields = jsii_guard.snake_case_struct_fields()
    assert "resource_name" in fields and "arn_format" in fields  # the scan sees ArnComponents
    found = [
        f"{Path(path).relative_to(ROOT)}:{problem}"
        for path, tree in zip(files, trees, strict=True)
        if _jsii_modules([tree])  # modules that use jsii (boto3's Config takes real dicts)
        for problem in _dicts_for_structs(tree, fields)
    ]
    assert not found, "pass the typed jsii struct instead:\n" + "\n".join(found)
    # The scan finds today's bug in the code as it was.
    old = ast.parse('Arn.format({"service": "logs", "resource_name": "x"}, Stack.of(self))')
    expected = "1 Arn.format(...) given a dict with ['resource_name']"
    assert _dicts_for_structs(old, fields) == [expected]
    # A problem names props by their snake_case names: not a struct.
    problem = ast.parse('Problem({"instance_type": "x"}, "expected ...")')
    assert _dicts_for_structs(problem, fields) == []


#: Our own callables whose dict argument maps prop names to values, not a jsii struct:
#: ml_platform._settings_parse.Problem (a rule's message) and its subclasses.
_TAKES_PROP_NAMES = frozenset({"Problem", "_Named"})


def _dicts_for_structs(tree: ast.Module, fields: dict[str, set[str]]) -> list[str]:
    found = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        if ast.unparse(call.func) in _TAKES_PROP_NAMES:
            continue
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            hits = sorted(k for k in _literal_keys(arg) if k in fields)
            if hits:
                found.append(f"{arg.lineno} {ast.unparse(call.func)}(...) given a dict with {hits}")
    return found


def _literal_keys(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Dict):
        keys = [k for k in node.keys if isinstance(k, ast.Constant)]
        return [k.value for k in keys if isinstance(k.value, str)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return [k.arg for k in node.keywords if k.arg]
    return []
