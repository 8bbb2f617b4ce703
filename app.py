#!/usr/bin/env python3
"""CDK entry point: `npx cdk synth` runs this. Settings come from cdk.json context."""

import sys
from pathlib import Path

from ml_platform.app import build_platform, new_app, settings_from_app
from ml_platform.config import SettingsError, context_file_problems, shadowed_settings
from ml_platform.versions import neuron_chart_dir, volcano_chart_dir


def main() -> None:
    app = new_app()
    # The CDK CLI runs the app in the project folder. A setting of cdk.context.json that
    # cdk.json overrides would be dropped silently (the CLI lets cdk.json win): an error.
    problems: list[str] = []
    project = Path("cdk.json")
    try:
        problems += shadowed_settings(project) if project.is_file() else []
    except SettingsError as error:
        problems += error.problems
    try:
        # The CDK CLI runs this in the folder of the cdk.json it read.
        duplicates = context_file_problems(Path("cdk.json"), Path("cdk.context.json"))
        if duplicates:
            raise SettingsError(duplicates)
        settings = settings_from_app(app)
    except SettingsError as error:
        problems += error.problems
    if problems:
        print(SettingsError(problems), file=sys.stderr)
        sys.exit(1)
    # `-c ml-platform:nag=false` skips cdk-nag (e.g. for quick iterations); tests always run it.
    nag = str(app.node.try_get_context("ml-platform:nag")).lower() != "false"
    # Volcano's and Neuron's charts as `mlp charts fetch` verified and unpacked them, when it
    # has been run.
    root = Path(__file__).resolve().parent
    volcano, neuron = volcano_chart_dir(root), neuron_chart_dir(root)
    platform = build_platform(
        app,
        settings,
        nag=nag,
        volcano_chart_dir=str(volcano) if (volcano / "Chart.yaml").is_file() else None,
        neuron_chart_dir=str(neuron) if (neuron / "Chart.yaml").is_file() else None,
    )
    if settings.cost_annotations:
        # The estimator is tooling, outside the construct library: imported only when asked for.
        from ml_platform_pricing.annotate import annotate_costs

        annotate_costs(platform.stacks)
    app.synth()


if __name__ == "__main__":
    main()
