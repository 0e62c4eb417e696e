"""Options on the process: env, args, cwd, terminal, hostname, umask, OOM score, rlimits.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping

from podkit.oci.defaults import DEFAULT_PATH_ENV
from podkit.oci.opts.core import (
    _UINT32,
    _UINT64,
    SpecOpt,
    SpecOptError,
    _abs_path,
    _int,
    _process,
    _str,
    _str_map,
    _strings,
    _user,
)
from podkit.oci.spec import (
    Box,
    POSIXRlimit,
    Spec,
)
from podkit.oci.values import RLIMITS

__all__ = [
    "with_default_path_env",
    "with_domainname",
    "with_env",
    "with_hostname",
    "with_oom_score_adj",
    "with_process_args",
    "with_process_cwd",
    "with_rlimit",
    "with_rlimits",
    "with_tty",
    "with_tty_size",
    "with_umask",
]


def _merge_env(current: list[str], updates: list[str]) -> list[str]:
    out = list(current)
    index = {e.partition("=")[0]: i for i, e in enumerate(out)}
    drop: set[int] = set()
    for value in updates:
        key, eq, _ = value.partition("=")
        i = index.get(key)
        if not eq:  # "KEY" without "=" unsets KEY (containerd semantics)
            if i is not None:
                drop.add(i)
        elif i is None:
            index[key] = len(out)
            out.append(value)
        else:
            out[i] = value
            drop.discard(i)
    return [e for i, e in enumerate(out) if i not in drop]


def with_env(env: Iterable[str] | Mapping[str, str]) -> SpecOpt:
    """Set environment variables, replacing by key; ``"KEY"`` without ``=`` unsets ``KEY``."""
    if isinstance(env, Mapping):
        values = [f"{k}={v}" for k, v in _str_map(env, "environment variable").items()]
    else:
        values = _strings(env, "environment variable")
    for v in values:
        if v.startswith("="):
            raise SpecOptError(f"invalid environment variable {v!r}: empty name")

    def opt(s: Spec) -> None:
        p = _process(s)
        if values:
            p.env = _merge_env(p.env or [], values)

    return opt


def with_default_path_env() -> SpecOpt:
    """Set ``PATH`` to the default Unix path (containerd's ``WithDefaultPathEnv``)."""
    return with_env([DEFAULT_PATH_ENV])


def with_process_args(*args: str) -> SpecOpt:
    """Replace ``process.args`` (and drop a Windows ``commandLine``)."""
    values = _strings(args, "process argument") if args else []
    if not values:
        raise SpecOptError("invalid process args (): at least one argument is required")

    def opt(s: Spec) -> None:
        p = _process(s)
        p.args = list(values)
        p.command_line = None

    return opt


def with_process_cwd(cwd: str) -> SpecOpt:
    """Set ``process.cwd`` (an absolute path inside the container)."""
    path = _abs_path(cwd, "process cwd")

    def opt(s: Spec) -> None:
        _process(s).cwd = path

    return opt


def with_tty() -> SpecOpt:
    """Give the process a terminal and ``TERM=xterm``."""
    set_term = with_env(["TERM=xterm"])

    def opt(s: Spec) -> None:
        _process(s).terminal = True
        set_term(s)

    return opt


def with_tty_size(width: int, height: int) -> SpecOpt:
    """Set ``process.consoleSize`` in characters."""
    w = _int(width, "console width", *_UINT32)
    h = _int(height, "console height", *_UINT32)

    def opt(s: Spec) -> None:
        _process(s).console_size = Box(width=w, height=h)

    return opt


def with_hostname(name: str) -> SpecOpt:
    """Set the container's hostname (needs its own UTS namespace)."""
    value = _str(name, "hostname")
    if len(value.encode()) > 64:
        raise SpecOptError(f"invalid hostname {value!r}: longer than 64 bytes")

    def opt(s: Spec) -> None:
        s.hostname = value

    return opt


def with_domainname(name: str) -> SpecOpt:
    """Set the container's NIS domain name (runtime-spec 1.1.0; runc 1.1 ignores it)."""
    value = _str(name, "domainname")
    if len(value.encode()) > 64:
        raise SpecOptError(f"invalid domainname {value!r}: longer than 64 bytes")

    def opt(s: Spec) -> None:
        s.domainname = value

    return opt


def with_umask(umask: int) -> SpecOpt:
    """Set ``process.user.umask`` (e.g. ``0o022``)."""
    value = _int(umask, "umask", 0, 0o777)

    def opt(s: Spec) -> None:
        _user(s).umask = value

    return opt


def with_oom_score_adj(adj: int) -> SpecOpt:
    """Set ``process.oomScoreAdj`` (-1000..1000; lowering it needs CAP_SYS_RESOURCE)."""
    value = _int(adj, "oomScoreAdj", -1000, 1000)

    def opt(s: Spec) -> None:
        _process(s).oom_score_adj = value

    return opt


def _rlimit(type: str, soft: int, hard: int) -> POSIXRlimit:
    t = _str(type, "rlimit type")
    if t not in RLIMITS:
        raise SpecOptError(f"unknown rlimit type {t!r}: expected one of {sorted(RLIMITS)}")
    s_ = _int(soft, f"{t} soft limit", *_UINT64)
    h_ = _int(hard, f"{t} hard limit", *_UINT64)
    if s_ > h_:
        raise SpecOptError(f"invalid {t}: soft limit {s_} is above hard limit {h_}")
    return POSIXRlimit(type=t, soft=s_, hard=h_)


def with_rlimit(type: str, soft: int, hard: int) -> SpecOpt:
    """Set one rlimit, replacing an entry of the same type."""
    return with_rlimits([(type, soft, hard)])


def with_rlimits(rlimits: Iterable[POSIXRlimit | tuple[str, int, int]]) -> SpecOpt:
    """Set several rlimits (``POSIXRlimit`` or ``(type, soft, hard)``), replacing by type."""
    items = [
        _rlimit(r.type, r.soft, r.hard) if isinstance(r, POSIXRlimit) else _rlimit(*r)
        for r in rlimits
    ]

    def opt(s: Spec) -> None:
        p = _process(s)
        current = list(p.rlimits or [])
        for r in items:
            for i, old in enumerate(current):
                if old.type == r.type:
                    current[i] = copy.deepcopy(r)
                    break
            else:
                current.append(copy.deepcopy(r))
        p.rlimits = current

    return opt
