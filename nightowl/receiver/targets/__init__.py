"""The notify targets, one module each (``base.py`` says what a module holds): found here, not listed, so a
new target is its module, a line in fixtures/alerts/serve.yaml and docs/receiver.md, and its test."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import cast

from nightowl.receiver.targets.base import TargetKind


@functools.cache
def registry() -> dict[str, TargetKind]:
    """Every target module by its KIND, in RANK order (the order a config's targets are posted in)."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base":
            found.append(cast(TargetKind, importlib.import_module(f"{__name__}.{info.name}")))
    return {module.KIND: module for module in sorted(found, key=lambda module: (module.RANK, module.KIND))}
