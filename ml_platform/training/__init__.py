"""BERT pretraining on Trainium as TorchX jobs.

* :mod:`~ml_platform.training.component`: the TorchX component (``trainium_ddp``), the
  single source of truth for a job; usable with ``torchx run``.
* :mod:`~ml_platform.training.jobs`: the shipped jobs and their checks against settings.
* :mod:`~ml_platform.training.render`: TorchX's Kubernetes renderer, made reproducible.
* :mod:`~ml_platform.training.images`: pinned images and sources.
* :mod:`~ml_platform.training.image`: builds and pushes the training image (``make image``).

The reviewed manifests come from :mod:`ml_platform.k8s_charts.workloads`.

This ``__init__`` imports nothing on purpose: ``torchx run ml_platform/training/component.py:...``
registers the component module before it imports this package, so importing the component
from here would be circular.
"""
