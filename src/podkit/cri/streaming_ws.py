"""Old path of :mod:`podkit.cri.streaming.ws`, kept importable (the same module)."""

from __future__ import annotations

import sys

from podkit.cri.streaming import ws as _module
from podkit.cri.streaming.ws import *  # noqa: F403 (the names, for type checkers)
from podkit.cri.streaming.ws import __all__ as __all__

sys.modules[__name__] = _module
