"""The process-wide default cache: the CDI Go library's package-level API, in Python.

Tools that just want "the devices on this machine" need not build and keep a :class:`Cache`::

    from podkit import cdi
    cdi.inject_devices(spec, ["vendor.com/gpu=0"])   # the default cache, made on first use
    cdi.configure(spec_dirs=["/etc/cdi"], auto_refresh=False)

The default cache reads :data:`DEFAULT_SPEC_DIRS` with auto-refresh on, like the Go library's
``GetDefaultCache()``. :func:`configure` replaces it with one built from the given options (the
others keep their current values) and closes the old one, which then answers from its last scan.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable

from podkit import oci
from podkit.cdi.cache import DEFAULT_SPEC_DIRS, Cache

__all__ = ["configure", "default_cache", "inject_devices", "refresh"]

_lock = threading.Lock()
_cache: Cache | None = None


def default_cache() -> Cache:
    """The process-wide cache (``DEFAULT_SPEC_DIRS``, auto-refresh), made on first use."""
    global _cache
    with _lock:
        if _cache is None:
            _cache = Cache(DEFAULT_SPEC_DIRS, auto_refresh=True)
        return _cache


def configure(
    spec_dirs: Iterable[str | os.PathLike[str]] | None = None,
    *,
    auto_refresh: bool | None = None,
) -> Cache:
    """Rebuild the default cache with these options (``None`` keeps the current value).

    The new cache has scanned its directories when this returns; the old one is closed.
    """
    global _cache
    with _lock:
        old = _cache
        dirs = tuple(spec_dirs) if spec_dirs is not None else (
            old.spec_dirs if old is not None else DEFAULT_SPEC_DIRS)
        watch = auto_refresh if auto_refresh is not None else (
            old.auto_refresh if old is not None else True)
        _cache = Cache(dirs, auto_refresh=watch)
        new = _cache
    if old is not None:
        old.close()
    return new


def refresh() -> dict[str, list[str]]:
    """Rescan the default cache's directories now; the errors (path -> messages)."""
    return default_cache().refresh()


def inject_devices(oci_spec: oci.Spec | None, names: Iterable[str]) -> list[str]:
    """:meth:`Cache.inject_devices` on the default cache: all or nothing."""
    return default_cache().inject_devices(oci_spec, names)
