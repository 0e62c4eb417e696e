"""Old path of :mod:`podkit.cri.streaming.sessions`, kept importable (the same module)."""

from __future__ import annotations

import sys

from podkit.cri.streaming import sessions as _module
from podkit.cri.streaming.sessions import *  # noqa: F403 (the names, for type checkers)
from podkit.cri.streaming.sessions import __all__ as __all__

sys.modules[__name__] = _module
