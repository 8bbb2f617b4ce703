"""``python -m ml_platform_cli`` runs ``mlp``."""

import sys

from ml_platform_cli.main import main

sys.exit(main())
