"""Old path of :mod:`podkit.cri.streaming.wire`, kept importable (the same module)."""

from __future__ import annotations

import sys

from podkit.cri.streaming import wire as _module
from podkit.cri.streaming.wire import *  # noqa: F403 (the names, for type checkers)
from podkit.cri.streaming.wire import __all__ as __all__

sys.modules[__name__] = _module
