#!/usr/bin/env python3
"""CDK entry point: `npx cdk synth` runs this. Settings come from cdk.json context."""

import sys

from ml_platform.app import build_platform, new_app, settings_from_app
from ml_platform.config import SettingsError


def main() -> None:
    app = new_app()
    try:
        settings = settings_from_app(app)
    except SettingsError as error:
        print(error, file=sys.stderr)
        sys.exit(1)
    # `-c ml-platform:nag=false` skips cdk-nag (e.g. for quick iterations); tests always run it.
    nag = str(app.node.try_get_context("ml-platform:nag")).lower() != "false"
    build_platform(app, settings, nag=nag)
    app.synth()


if __name__ == "__main__":
    main()
