#!/usr/bin/env bash
# Build the training image, log in to ECR, tag it with the platform's image URI and push it.
# `make image` runs this; it hands over to the Python helper, which reads cdk.json and the
# pinned versions (ml_platform/training/images.py). Arguments pass through, e.g.
#   bash ml_platform/training/image.sh --dry-run      # print the commands only
#   bash ml_platform/training/image.sh --no-push      # build only
#   bash ml_platform/training/image.sh --cdk-json other/cdk.json
# Needs Docker and AWS credentials that may push to the training ECR repository.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${PY:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
exec "$PY" -m ml_platform.training.image "$@"
