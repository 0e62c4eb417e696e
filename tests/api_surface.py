"""The public API's list (docs/api.md) and its snapshot script, for the tests that check them:
``scripts/api_snapshot.py`` loaded as a module (scripts/ is not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "api_snapshot.py"


def snapshot_script() -> ModuleType:
    """``scripts/api_snapshot.py`` as a module (loaded once per process)."""
    name = "podkit_api_snapshot_script"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPT)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def public_modules() -> list[str]:
    """The public modules docs/api.md lists."""
    modules: list[str] = snapshot_script().public_modules()
    return modules
