"""Reading the node config: defaults, then a TOML file, then the environment, then overrides.

Each later source wins key by key: a frontend's own defaults (``cri serve``'s conf dir) under
the file; ``/etc/podkit/podkit.toml`` (or ``$PODKIT_CONFIG``, or the file given); one
``PODKIT_<KEY>`` variable per key (``PODKIT_NETWORK_BUILTIN_SUBNET``); then the overrides a
command line gives. An unknown key or a bad value is refused naming its file, key and line (or
its variable, or its option), with the key meant when the name is close to one.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from podkit.errors import InvalidArgumentError, quote
from podkit.node.config import ConfigField, NodeConfig, fields

__all__ = ["CONFIG_ENV", "CONFIG_FILE", "ConfigError", "dump_config", "load_config",
           "reference_table"]

CONFIG_FILE = "/etc/podkit/podkit.toml"
"""The node config read when none is named (and it exists)."""
CONFIG_ENV = "PODKIT_CONFIG"
"""The environment variable naming the config file (it must exist)."""

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class ConfigError(InvalidArgumentError):
    """A node config key or value that cannot be used; ``source`` is the file (or variable, or
    option) it came from, ``key`` the dotted key, ``line`` its line in the file (0: none)."""

    def __init__(self, message: str, *, source: str = "", key: str = "", line: int = 0) -> None:
        super().__init__(message)
        self.source = source
        self.key = key
        self.line = line


def _by_key() -> dict[str, ConfigField]:
    return {f.key: f for f in fields()}


def _tables() -> set[str]:
    return {f.key.rpartition(".")[0] for f in fields() if "." in f.key}


# -- values ---------------------------------------------------------------------------------


def _kind(t: Any) -> str:
    return {str: "a string", bool: "true or false", int: "an integer"}.get(
        t, "a list of strings")


def _typed(f: ConfigField, value: Any) -> tuple[Any, str]:
    """``value`` as the field's type, or the problem."""
    if f.type is bool:
        ok = isinstance(value, bool)
    elif f.type is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif f.type is str:
        ok = isinstance(value, str)
    else:
        ok = isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
        value = tuple(value) if ok else value
    if not ok:
        return value, f"{quote(value)} is not {_kind(f.type)}"
    problem = f.check(value) if f.check is not None else ""
    return value, (f"{quote(value)}: {problem}" if problem else "")


def _from_text(f: ConfigField, text: str) -> Any:
    """An environment variable's text as the field's type (lists: comma-separated)."""
    if f.type is bool:
        low = text.strip().lower()
        return True if low in _TRUE else False if low in _FALSE else text
    if f.type is int:
        try:
            return int(text)
        except ValueError:
            return text
    if f.type is str:
        return text
    return [p.strip() for p in text.split(",") if p.strip()]


def _relative_to(base: Path, f: ConfigField, value: Any) -> Any:
    """A path key's relative value(s) joined to ``base`` (a file's dir, or the cwd)."""
    if not f.path:
        return value
    if isinstance(value, tuple):
        return tuple(str(base / v) if v else v for v in value)
    return str(base / value) if value else value


# -- the TOML file --------------------------------------------------------------------------

_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_ASSIGN = re.compile(r"^\s*([A-Za-z0-9_\-.\"' ]+?)\s*=")


def _unquote(key: str) -> str:
    return ".".join(p.strip().strip("\"'") for p in key.split("."))


def key_lines(text: str) -> dict[str, int]:
    """The line (1-based) each dotted key and table of a TOML text is written on."""
    out: dict[str, int] = {}
    table = ""
    for number, line in enumerate(text.splitlines(), 1):
        if m := _HEADER.match(line):
            table = _unquote(m.group(1))
            out.setdefault(table, number)
        elif m := _ASSIGN.match(line):
            key = _unquote(m.group(1))
            out.setdefault(f"{table}.{key}" if table else key, number)
    return out


def _flatten(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    tables = _tables()
    for key, value in data.items():
        full = prefix + key
        if isinstance(value, dict) and full in tables:
            yield from _flatten(value, full + ".")
        else:
            yield full, value


def _suggest(key: str) -> str:
    known = [*_by_key(), *_tables()]
    near = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
    if not near:  # a known key under another table: builtin.brige -> network.builtin.bridge
        last = key.rpartition(".")[2]
        tails = {k.rpartition(".")[2]: k for k in _by_key()}
        close = difflib.get_close_matches(last, list(tails), n=1, cutoff=0.75)
        near = [tails[close[0]]] if close else []
    return f" (did you mean {near[0]!r}?)" if near else ""


def _read_file(path: Path) -> dict[str, Any]:
    """The file's keys as typed values; ``ConfigError`` with file, key and line."""
    import tomllib  # with the first config file (a server without one starts without it)

    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file", source=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it: {exc}", source=str(path)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise ConfigError(f"{path}: not valid TOML: {exc}", source=str(path),
                          line=int(m.group(1)) if m else 0) from None
    lines = key_lines(text)
    known = _by_key()
    out: dict[str, Any] = {}
    for key, value in _flatten(data):
        line = lines.get(key, 0)
        where = f"{path}:{line}" if line else str(path)
        f = known.get(key)
        if f is None:
            what = "table" if isinstance(value, dict) else "key"
            raise ConfigError(f"{where}: unknown {what} {key!r}{_suggest(key)}",
                              source=str(path), key=key, line=line)
        value, problem = _typed(f, value)
        if problem:
            raise ConfigError(f"{where}: {key}: {problem}", source=str(path), key=key,
                              line=line)
        out[key] = _relative_to(path.parent, f, value)
    return out


# -- loading --------------------------------------------------------------------------------


def _config_path(path: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path | None:
    if path is not None and os.fspath(path):
        return Path(path).absolute()
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).absolute()
    return Path(CONFIG_FILE) if Path(CONFIG_FILE).is_file() else None


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields():
        text = env.get(f.env)
        if text is None or text == "":
            continue
        value, problem = _typed(f, _from_text(f, text))
        if problem:
            raise ConfigError(f"${f.env}: {problem}", source=f"${f.env}", key=f.key)
        out[f.key] = _relative_to(Path.cwd(), f, value)
    return out


def _checked(values: Mapping[str, Any], origins: Mapping[str, str], what: str,
             ) -> dict[str, Any]:
    known = _by_key()
    out: dict[str, Any] = {}
    for key, value in values.items():
        f = known.get(key)
        origin = origins.get(key, key)
        if f is None:
            raise ConfigError(f"{what} {key!r}: not a node config key{_suggest(key)}", key=key)
        value, problem = _typed(f, value)
        if problem:
            raise ConfigError(f"{origin}: {problem}", source=origin, key=key)
        out[key] = _relative_to(Path.cwd(), f, value)
    return out


def _build(values: Mapping[str, Any]) -> NodeConfig:
    """A ``NodeConfig`` from flat dotted keys (the rest at their defaults)."""
    nested: dict[str, Any] = {}
    for key, value in values.items():
        *tables, name = key.split(".")
        d = nested
        for t in tables:
            d = d.setdefault(t, {})
        d[name] = value
    config: NodeConfig = _make(NodeConfig, nested)
    return config


def _make(cls: type[Any], values: Mapping[str, Any]) -> Any:
    kw = {}
    for f in attrs.fields(attrs.resolve_types(cls)):
        if f.name not in values:
            continue
        table = f.metadata.get("table")
        kw[f.name] = _make(f.type, values[f.name]) if table else values[f.name]
    return cls(**kw)


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    defaults: Mapping[str, Any] | None = None,
    origins: Mapping[str, str] | None = None,
) -> NodeConfig:
    """The node config: ``defaults`` (a frontend's own, by dotted key), the TOML file, the
    environment, then ``overrides`` (by dotted key), each later one winning.

    The file is ``path``, else ``$PODKIT_CONFIG``, else ``/etc/podkit/podkit.toml`` when it
    exists; a named file must exist. ``env`` defaults to ``os.environ``. Relative paths are
    taken from the file's directory (a file) or the working directory (the rest).
    ``origins`` names where an override came from (``{"runtime.name": "--runtime"}``) for
    its error. Raises :class:`ConfigError`.
    """
    env = os.environ if env is None else env
    values = _checked(defaults or {}, {}, "default")
    file = _config_path(path, env)
    if file is not None:
        values.update(_read_file(file))
    values.update(_from_env(env))
    values.update(_checked(overrides or {}, origins or {}, "override"))
    return _build(values)


# -- text -----------------------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def dump_config(config: NodeConfig) -> str:
    """``config`` as TOML text that ``load_config`` reads back to an equal config."""
    lines: list[str] = []
    table = None
    for f in fields():
        head, _, name = f.key.rpartition(".")
        if head != table:
            lines += ["", f"[{head}]"] if head else []
            table = head
        value: Any = config
        for part in f.key.split("."):
            value = getattr(value, part)
        lines.append(f"{name} = {_toml_value(value)}")
    return "\n".join(lines).lstrip("\n") + "\n"


def reference_table() -> str:
    """Every key as a Markdown table row: key, variable, default, what (docs/config.md)."""
    rows = ["| key | environment | default | what |", "|---|---|---|---|"]
    for f in fields():
        doc = f.doc.replace("|", "\\|")
        rows.append(f"| `{f.key}` | `{f.env}` | `{_toml_value(f.default)}` | {doc} |")
    return "\n".join(rows) + "\n"
