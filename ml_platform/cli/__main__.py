"""``python -m ml_platform.cli`` runs ``mlp``."""

import sys

from ml_platform.cli.main import main

sys.exit(main())
