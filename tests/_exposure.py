"""What others (not the owner, not the group) can read of a tree: the census behind the
private-files guarantee (docs/runtime.md: bundles 0700 or 0710, ``config.json`` 0600).

A file that holds a secret is exposed when its own mode lets others read it and every
directory below the top of the walk lets others through (the top and the dirs above it are
taken as open: ``/var/lib`` is, and a test's 0700 temp dir must not hide anything). A
directory above an OCI bundle (a dir with ``config.json``) may let others pass (``--x``, as
containerd's 0711 roots do) but never list or write; the bundle and the directory that holds
it let others do nothing at all.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

__all__ = ["exposures"]

_READ_LIMIT = 16 << 20  # bigger files are image content, not podkit's writing


def _others_pass(path: Path, top: Path) -> bool:
    """Whether others can reach ``path``'s entries: every dir below ``top`` has o+x."""
    for d in (path, *path.parents):
        if top not in d.parents:
            break
        try:
            if not os.stat(d).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def _holds(path: Path, secret: bytes, size: int) -> bool:
    if size > _READ_LIMIT:
        return False
    try:
        return secret in path.read_bytes()
    except OSError:  # gone meanwhile, or a socket/fifo-like entry
        return False


def _bundle_problems(bundle: Path, top: Path) -> list[str]:
    out = []
    for i, d in enumerate((bundle, *bundle.parents)):
        if top not in d.parents:
            break
        mode = stat.S_IMODE(os.stat(d).st_mode)
        allowed = 0 if i < 2 else stat.S_IXOTH  # the bundle and its holder: nothing
        if mode & 0o007 & ~allowed:
            out.append(f"dir {d} ({mode:04o}) above bundle {bundle} lets others in")
    return out


def exposures(tops: Iterable[Path], secret: str) -> list[str]:
    """Every problem under ``tops``: files holding ``secret`` that others can read, and dirs
    above a bundle that let others in. Symlinks are not followed."""
    needle = secret.encode()
    out: list[str] = []
    for top in tops:
        top = top.absolute()
        for dirpath, _, filenames in os.walk(top):
            here = Path(dirpath)
            if "config.json" in filenames:
                out += _bundle_problems(here, top)
            for name in filenames:
                path = here / name
                try:
                    st = os.lstat(path)
                except FileNotFoundError:
                    continue
                if not stat.S_ISREG(st.st_mode) or not _holds(path, needle, st.st_size):
                    continue
                if st.st_mode & stat.S_IROTH and _others_pass(here, top):
                    out.append(f"file {path} ({stat.S_IMODE(st.st_mode):04o}) holds the "
                               "secret and others can read it")
    return sorted(set(out))
