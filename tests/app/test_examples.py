"""examples/: each outside app synthesizes, passes cfn-lint and cdk-nag, and builds what its
docstring says. One synthesis per example per session."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import ManualArgs, lint_by_config

from ml_platform.app import new_app
from tests.support import ROOT, synth_collecting_nag

EXAMPLES = ROOT / "examples"
NAMES = ("trainium-node-group", "mme-existing-bucket", "fsx-node-security-group")
#: Examples that are Python programs, not CDK apps; each is run by a test under tests/e2e/.
PROGRAMS = {"serve-locally": "serve.py"}


@dataclass
class Example:
    name: str
    outdir: Path
    error: str | None

    def templates(self) -> dict[str, dict[str, Any]]:
        return {
            p.name.removesuffix(".template.json"): json.loads(p.read_text())
            for p in self.outdir.glob("*.template.json")
        }

    def resources(self, kind: str) -> list[dict[str, Any]]:
        return [
            r
            for t in self.templates().values()
            for r in t["Resources"].values()
            if r["Type"] == kind
        ]


def _synthesize(folder: Path, outdir: Path) -> Example:
    context = json.loads((folder / "cdk.json").read_text())["context"]
    spec = importlib.util.spec_from_file_location(f"example_{folder.name}", folder / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    app = new_app(outdir=str(outdir), context=context)
    module.build(app)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    error = synth_collecting_nag(app)
    return Example(name=folder.name, outdir=outdir, error=error)


@pytest.fixture(scope="session")
def examples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Example]:
    """Every example, synthesized once per session with cdk-nag attached."""
    return {name: _synthesize(EXAMPLES / name, tmp_path_factory.mktemp(name)) for name in NAMES}


@pytest.fixture(params=NAMES)
def example(request: pytest.FixtureRequest, examples: dict[str, Example]) -> Example:
    return examples[request.param]


def test_every_example_is_a_cdk_app_folder_or_a_program() -> None:
    for name in NAMES:
        cdk_json = json.loads((EXAMPLES / name / "cdk.json").read_text())
        assert cdk_json["app"] == "python3 app.py"
        assert (EXAMPLES / name / "app.py").read_text().count("def build(app") == 1
    for name, program in PROGRAMS.items():
        assert not (EXAMPLES / name / "cdk.json").exists()
        assert (EXAMPLES / name / program).read_text().startswith('"""')
        assert f"examples/{name}/{program}" in (EXAMPLES / name / "README.md").read_text()
    assert sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()) == sorted([*NAMES, *PROGRAMS])
    listed = (EXAMPLES / "README.md").read_text()
    assert all(f"`{n}/`" in listed or f"]({n}/README.md)" in listed for n in [*NAMES, *PROGRAMS])


def test_example_synthesizes_offline_and_passes_cdk_nag(example: Example) -> None:
    assert example.error is None, example.error
    manifest = json.loads((example.outdir / "manifest.json").read_text())
    assert not manifest.get("missing"), "synthesis wanted a context lookup (AWS credentials)"
    assert example.templates()


def test_examples_pass_cfn_lint(examples: dict[str, Example]) -> None:
    """All examples' templates in one cfn-lint run (its start-up dominates)."""
    config = yaml.safe_load((ROOT / ".cfnlintrc.yaml").read_text()) or {}
    paths = [str(p) for e in examples.values() for p in e.outdir.glob("*.template.json")]
    assert len(paths) == len(NAMES)
    findings = [
        f"{m.filename}: {m.rule.id} {m.message}"
        for m in lint_by_config(
            ManualArgs(
                templates=paths,
                regions=["us-east-1"],
                ignore_checks=config.get("ignore_checks") or [],
            )
        )
    ]
    assert findings == []


def test_example_builds_what_it_says(example: Example) -> None:
    if example.name == "trainium-node-group":
        (group,) = example.resources("AWS::EKS::Nodegroup")
        assert group["Properties"]["ClusterName"] == "research"
        assert group["Properties"]["AmiType"] == "AL2023_x86_64_NEURON"
        (template,) = example.resources("AWS::EC2::LaunchTemplate")
        interfaces = template["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]
        # every network card of a trn1.32xlarge carries an EFA interface
        assert sorted({i["NetworkCardIndex"] for i in interfaces}) == list(range(8))
        ingress = example.resources("AWS::EC2::SecurityGroupIngress")
        into_cluster = [r for r in ingress if r["Properties"]["GroupId"] == "sg-0a1b2c3d4e5f60718"]
        assert len(into_cluster) == 4  # 443, 1025-65535, DNS tcp+udp from the nodes
    elif example.name == "mme-existing-bucket":
        (model,) = example.resources("AWS::SageMaker::Model")
        container = model["Properties"]["PrimaryContainer"]
        assert container["ModelDataUrl"] == "s3://team-triton-archives/ensembles/"
        assert not example.resources("AWS::S3::Bucket")
        statements = [
            s
            for p in example.resources("AWS::IAM::Policy")
            for s in p["Properties"]["PolicyDocument"]["Statement"]
            if s["Action"] == "sagemaker:InvokeEndpoint"
        ]
        assert [s["Condition"] for s in statements] == [
            {"StringLike": {"sagemaker:TargetModel": ["model_trt_python_t4-v*.tar.gz"]}}
        ]
    else:
        (fs,) = example.resources("AWS::FSx::FileSystem")
        assert fs["Properties"]["StorageCapacity"] == 2400
        assert fs["DeletionPolicy"] == "RetainExceptOnCreate"
        ingress = [
            r["Properties"]
            for r in example.resources("AWS::EC2::SecurityGroupIngress")
            if r["Properties"].get("Description") == "Lustre clients"
        ]
        assert {(r["FromPort"], r["ToPort"]) for r in ingress} == {(988, 988), (1018, 1023)}
