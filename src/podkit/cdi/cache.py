"""The CDI cache: spec directories, priorities, conflicts, errors, injection and producers.

``Cache`` scans ordered spec directories (later directories win), keeps every per-file and
per-directory problem in ``errors`` without letting one bad file hide other devices, resolves
qualified device names and injects their edits into an OCI spec, all-or-nothing. It is safe to
use from several threads: a refresh builds a new immutable snapshot and swaps it in.

Deliberate differences from the Go library (documented in docs/cdi.md):

* a conflict between two files of the same directory does not hide a definition of the same
  device from a higher-priority directory (Go deletes the name everywhere);
* requesting the same device twice in one injection applies its edits once;
* written specs are mode 0644 (Go writes 0600, unreadable for non-root runtimes);
* spec names with path separators or ``..`` are refused by ``write_spec``/``remove_spec``.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import stat as _stat
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

import attrs

from podkit import _files, oci
from podkit.cdi import names as _names
from podkit.cdi import validator as _validator
from podkit.cdi.errors import SpecError
from podkit.cdi.watch import ALL_CHANGED, SpecDirWatcher
from podkit.errors import InvalidArgumentError, NotFoundError, PodkitError

# The spec models, parsers and edits are imported where a spec is read, written or applied:
# a cache over directories without spec files (a CRI server's usual start) never needs them.
if TYPE_CHECKING:
    from podkit.cdi.edits import StatFunc
    from podkit.cdi.spec import ContainerEdits, Device, Spec

__all__ = [
    "DEFAULT_DYNAMIC_DIR",
    "DEFAULT_SPEC_DIRS",
    "DEFAULT_STATIC_DIR",
    "Cache",
    "InjectionError",
    "InvalidDeviceNamesError",
    "LoadedDevice",
    "LoadedSpec",
    "UnresolvableDevicesError",
    "generate_name_for_spec",
    "generate_name_for_transient_spec",
    "generate_spec_name",
    "generate_transient_spec_name",
]

DEFAULT_STATIC_DIR = "/etc/cdi"
"""Directory for static, admin-installed spec files (lowest priority by default)."""
DEFAULT_DYNAMIC_DIR = "/var/run/cdi"
"""Directory for specs generated at run time (highest priority by default)."""
DEFAULT_SPEC_DIRS: tuple[str, ...] = (DEFAULT_STATIC_DIR, DEFAULT_DYNAMIC_DIR)
"""The default spec directories, lowest priority first."""

_SPEC_EXTENSIONS = (".json", ".yaml")


class UnresolvableDevicesError(NotFoundError):
    """Some requested devices are not known to the cache; ``devices`` lists them in order."""

    def __init__(self, devices: Sequence[str]) -> None:
        self.devices = list(devices)
        super().__init__(f"unresolvable CDI devices {', '.join(self.devices)}")


class InvalidDeviceNamesError(_names.InvalidNameError):
    """Requested names that are not ``vendor/class=name``; ``problems`` maps each to why."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        self.problems = dict(problems)
        self.devices = list(self.problems)
        super().__init__("invalid CDI device names: " + "; ".join(self.problems.values()))


def _name_problems(names: Iterable[object]) -> dict[str, str]:
    """Each requested name that is not a valid qualified name, with the reason (in order)."""
    out: dict[str, str] = {}
    for name in names:
        if not isinstance(name, str):
            out[repr(name)] = f"device name {name!r} is a {type(name).__name__}, not a string"
            continue
        try:
            _names.parse_qualified_name(name)
        except _names.InvalidNameError as e:
            out[name] = str(e)
    return out


class InjectionError(PodkitError):
    """Resolved devices whose edits could not be applied (e.g. missing host device node)."""


@attrs.frozen(slots=True)
class LoadedSpec:
    """A spec as loaded from a file: the parsed spec, its path and its priority."""

    spec: Spec
    path: str
    priority: int

    @property
    def vendor(self) -> str:
        """Vendor part of the spec's kind."""
        return self.spec.vendor

    @property
    def class_(self) -> str:
        """Class part of the spec's kind."""
        return self.spec.class_

    def get_device(self, name: str) -> Device | None:
        """The device with this unqualified name in this spec, if any."""
        return self.spec.get_device(name)


@attrs.frozen(slots=True)
class LoadedDevice:
    """A resolvable device: the device definition and the spec file it comes from."""

    device: Device
    spec: LoadedSpec

    @property
    def qualified_name(self) -> str:
        """``vendor/class=name``."""
        return _names.qualified_name(self.spec.vendor, self.spec.class_, self.device.name)

    @property
    def edits(self) -> ContainerEdits:
        """The device's own container edits (without the spec-level ones)."""
        return self.device.container_edits


@attrs.frozen(slots=True)
class _Snapshot:
    devices: Mapping[str, LoadedDevice]
    specs: tuple[LoadedSpec, ...]
    errors: Mapping[str, tuple[str, ...]]


_EMPTY = _Snapshot(devices={}, specs=(), errors={})
_Tag = tuple[int, int, int]  # priority, process-wide validator generation, cache validator gen
_StatKey = tuple[int, int, int, int, _Tag]


def _check_spec_name(name: str) -> str:
    if not isinstance(name, str) or not name or "\0" in name:
        raise InvalidArgumentError(f"invalid CDI Spec name {name!r}: must be a non-empty string")
    if "/" in name or os.sep in name or ".." in name or name.startswith("."):
        raise InvalidArgumentError(
            f"invalid CDI Spec name {name!r}: path separators, '..' and leading '.' are refused"
        )
    return name if name.endswith(_SPEC_EXTENSIONS) else name + ".yaml"


def generate_spec_name(vendor: str, class_: str) -> str:
    """The conventional file name (without extension) for a vendor/class: ``vendor-class``."""
    return f"{vendor}-{class_}"


def generate_transient_spec_name(vendor: str, class_: str, transient_id: str) -> str:
    """Name for a per-container spec: ``vendor-class_<id>`` (every ``/`` in id becomes ``_``)."""
    return f"{vendor}-{class_}_{transient_id.replace('/', '_')}"


def _kind_parts(spec: Spec) -> tuple[str, str]:
    vendor, class_ = _names.parse_qualifier(spec.kind)
    if not vendor:
        raise InvalidArgumentError(f'invalid vendor/class "{spec.kind}" in Spec')
    return vendor, class_


def generate_name_for_spec(spec: Spec) -> str:
    """:func:`generate_spec_name` from the spec's ``kind``."""
    return generate_spec_name(*_kind_parts(spec))


def generate_name_for_transient_spec(spec: Spec, transient_id: str) -> str:
    """:func:`generate_transient_spec_name` from the spec's ``kind``."""
    return generate_transient_spec_name(*_kind_parts(spec), transient_id)


class Cache:
    """Resolvable CDI devices from ordered spec directories (later directories win).

    >>> cache = Cache(spec_dirs=["/etc/cdi", "/var/run/cdi"], auto_refresh=False)  # doctest: +SKIP
    >>> cache.inject_devices(oci_spec, ["vendor.com/gpu=0"])  # doctest: +SKIP

    ``auto_refresh=True`` watches the directories (inotify) so every query sees the files as
    they are when it starts; with ``False`` only :meth:`refresh` rescans. ``stat`` looks up host
    device nodes at injection time (``os.lstat``; replace it in tests). ``file_mode`` is the
    mode of spec files written by :meth:`write_spec`. ``spec_validator`` is this cache's extra
    spec validator; it runs after the process-wide one (``cdi.set_spec_validator``) on every
    spec loaded or written.
    """

    def __init__(
        self,
        spec_dirs: Iterable[str | os.PathLike[str]] = DEFAULT_SPEC_DIRS,
        *,
        auto_refresh: bool = True,
        stat: StatFunc = os.lstat,
        file_mode: int = 0o644,
        spec_validator: _validator.SpecValidator | None = None,
    ) -> None:
        dirs = tuple(posixpath.normpath(os.fspath(d)) for d in spec_dirs)
        self._dirs = dirs or DEFAULT_SPEC_DIRS
        self._stat = stat
        self._file_mode = file_mode
        self._check_validator(spec_validator)
        self._validator = spec_validator
        self._validator_gen = 0
        self._lock = threading.RLock()
        self._snap = _EMPTY
        self._snap_gens = (-1, -1)
        self._parsed: dict[str, tuple[_StatKey, LoadedSpec | str]] = {}
        self._dir_errors: dict[str, str] = {}
        self._changed = threading.Condition()
        self._generation = 0
        self._listeners: list[Callable[[], None]] = []
        self._closed = False
        self._watcher: SpecDirWatcher | None = None
        if auto_refresh:
            self._watcher = SpecDirWatcher(self._dirs, on_change=self._notify)
            self._watcher.start()
        with self._lock:
            self._scan(full=True)

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def spec_dirs(self) -> tuple[str, ...]:
        """The spec directories, lowest priority first."""
        return self._dirs

    @property
    def auto_refresh(self) -> bool:
        """True when the cache watches its directories."""
        return self._watcher is not None

    def close(self) -> None:
        """Stop watching (idempotent); the cache keeps answering from its last scan."""
        with self._lock:
            self._closed = True
            watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.close()
        self._notify()

    def __enter__(self) -> Cache:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- change notification ----------------------------------------------------------------

    def _notify(self) -> None:
        # Called from watchdog's thread: never take the cache lock here.
        with self._changed:
            self._generation += 1
            self._changed.notify_all()
        for cb in list(self._listeners):
            with contextlib.suppress(Exception):  # a listener must not kill the observer thread
                cb()

    def add_listener(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` (from the watcher thread) whenever a spec directory changes.

        The callback runs on watchdog's thread: keep it short and do not call the cache from
        it (wake another thread instead, or use :meth:`wait_for_change`).
        """
        self._listeners.append(callback)

    def wait_for_change(self, timeout: float | None = None) -> bool:
        """Block until a spec directory changes (auto-refresh only); False on timeout."""
        with self._changed:
            start = self._generation
            return self._changed.wait_for(
                lambda: self._generation != start or self._closed, timeout
            )

    # -- spec validators --------------------------------------------------------------------

    @staticmethod
    def _check_validator(fn: _validator.SpecValidator | None) -> None:
        if fn is not None and not callable(fn):
            raise TypeError(f"spec validator must be callable or None, got {type(fn).__name__}")

    @property
    def spec_validator(self) -> _validator.SpecValidator | None:
        """This cache's own spec validator (the process-wide one runs too)."""
        return self._validator

    def set_spec_validator(self, fn: _validator.SpecValidator | None) -> None:
        """Replace this cache's own spec validator (``None`` removes it) and rescan now."""
        self._check_validator(fn)
        with self._lock:
            self._validator = fn
            self._validator_gen += 1
            self._scan(full=True)

    def _gens(self) -> tuple[int, int]:
        return _validator.validator_generation(), self._validator_gen

    # -- scanning ---------------------------------------------------------------------------

    def _load(self, path: str, priority: int, trust: bool) -> LoadedSpec | str | None:
        """Load one spec file (or reuse it if unchanged); None if it is not a regular file.

        ``trust``: the watcher saw no event for this path, so a cached result is reused
        without even opening the file. A result from other validators is never reused.
        """
        tag: _Tag = (priority, *self._gens())
        if trust:
            cached = self._parsed.get(path)
            if cached is not None and cached[0][-1] == tag:
                return cached[1]
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as e:
            return f'failed to load CDI Spec: failed to read CDI Spec "{path}": {e.strerror}'
        try:  # the parsers and edits, with the first spec file (out of fds: an error like a read's)
            from podkit.cdi import edits as _edits  # noqa: F401  # resolve() and inject_devices()
            from podkit.cdi.spec import spec_from_file_data
        except OSError as e:
            os.close(fd)
            return f'failed to load CDI Spec: failed to read CDI Spec "{path}": {e.strerror}'
        try:
            st = os.fstat(fd)
            if not _stat.S_ISREG(st.st_mode):
                return None
            key = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, tag)
            cached = self._parsed.get(path)
            if cached is not None and cached[0] == key:
                return cached[1]
            chunks = []
            while True:
                chunk = os.read(fd, max(st.st_size + 1, 65536))
                if not chunk:
                    break
                chunks.append(chunk)
        except OSError as e:
            return f'failed to load CDI Spec: failed to read CDI Spec "{path}": {e.strerror}'
        finally:
            os.close(fd)
        result: LoadedSpec | str
        try:
            spec = spec_from_file_data(b"".join(chunks), path,
                                       validators=_validator.active(self._validator))
            result = LoadedSpec(spec=spec, path=path, priority=priority)
        except SpecError as e:
            result = f"failed to load CDI Spec: {e}"
        self._parsed[path] = (key, result)
        return result

    def _list_dir(self, directory: str) -> Iterator[str]:
        with os.scandir(directory) as it:
            entries = sorted(
                (e.name, e.path) for e in it if e.name.endswith(_SPEC_EXTENSIONS)
            )
        for _, path in entries:
            yield path

    def _scan(self, *, full: bool, changed: Iterable[str] = ()) -> None:
        """Rescan every directory; must hold ``_lock``. Reuses unchanged parsed files."""
        if full:
            self._parsed.clear()
        else:
            for path in changed:
                self._parsed.pop(path, None)
        trust = not full and self._watcher is not None and not self._watcher.degraded
        self._snap_gens = self._gens()
        devices: dict[str, LoadedDevice] = {}
        specs: list[LoadedSpec] = []
        errors: dict[str, list[str]] = {}
        seen_paths: set[str] = set()
        for prio, directory in enumerate(self._dirs):
            table: dict[str, LoadedDevice] = {}
            conflicted: set[str] = set()
            try:
                files = list(self._list_dir(directory))
            except FileNotFoundError:
                continue
            except OSError as e:
                errors.setdefault(directory, []).append(
                    f'failed to read CDI Spec directory "{directory}": {e.strerror or e}'
                )
                continue
            for path in files:
                seen_paths.add(path)
                loaded = self._load(path, prio, trust)
                if loaded is None:
                    continue
                if isinstance(loaded, str):
                    errors.setdefault(path, []).append(loaded)
                    continue
                specs.append(loaded)
                vendor, class_ = loaded.vendor, loaded.class_
                for dev in loaded.spec.devices:
                    qname = _names.qualified_name(vendor, class_, dev.name)
                    other = table.get(qname)
                    if other is None:
                        table[qname] = LoadedDevice(device=dev, spec=loaded)
                        continue
                    msg = (f'conflicting device "{qname}" '
                           f'(specs "{path}", "{other.spec.path}")')
                    errors.setdefault(path, []).append(msg)
                    errors.setdefault(other.spec.path, []).append(msg)
                    conflicted.add(qname)
            for qname in conflicted:
                table.pop(qname, None)
                devices.pop(qname, None)  # ambiguous here: lower-priority ones are hidden too
            devices.update(table)
        for path in list(self._parsed):
            if path not in seen_paths:
                del self._parsed[path]
        self._snap = _Snapshot(
            devices=devices,
            specs=tuple(specs),
            errors={k: tuple(v) for k, v in errors.items()},
        )

    def _current(self) -> _Snapshot:
        """The snapshot to answer a query from, rescanning first if anything changed."""
        watcher = self._watcher
        if watcher is None:
            return self._snap
        with self._lock:
            changed = watcher.poll()
            if changed or self._snap_gens != self._gens():
                self._scan(full=ALL_CHANGED in changed, changed=changed)
            return self._snap

    def refresh(self) -> dict[str, list[str]]:
        """Rescan the spec directories now; returns the errors (path -> messages)."""
        with self._lock:
            if self._watcher is not None:
                self._watcher.poll()
            self._scan(full=True)
        return self.errors

    # -- queries ----------------------------------------------------------------------------

    @property
    def errors(self) -> dict[str, list[str]]:
        """Problems of the last scan: spec file or directory path -> messages. Never rescans."""
        out = {k: list(v) for k, v in self._snap.errors.items()}
        watcher = self._watcher
        if watcher is not None:
            for d, msg in watcher.errors.items():
                out.setdefault(d, []).append(msg)
        return out

    @property
    def dir_errors(self) -> dict[str, str]:
        """Directory -> why it is not watched (auto-refresh only)."""
        watcher = self._watcher
        return dict(watcher.errors) if watcher is not None else {}

    def get_spec_errors(self, path: str) -> list[str]:
        """Errors recorded for one spec file."""
        return list(self._snap.errors.get(path, ()))

    def list_devices(self) -> list[str]:
        """Sorted qualified names of every resolvable device."""
        return sorted(self._current().devices)

    def list_vendors(self) -> list[str]:
        """Sorted vendors of all loaded specs."""
        return sorted({s.vendor for s in self._current().specs})

    def list_classes(self) -> list[str]:
        """Sorted classes of all loaded specs."""
        return sorted({s.class_ for s in self._current().specs})

    def list_specs(self) -> list[LoadedSpec]:
        """All loaded specs in scan order (directory order, then file name)."""
        return list(self._current().specs)

    def get_device(self, name: str) -> LoadedDevice | None:
        """The resolvable device with this qualified name (exact match), or None."""
        return self._current().devices.get(name)

    def get_vendor_specs(self, vendor: str) -> list[LoadedSpec]:
        """Loaded specs of ``vendor`` in scan order."""
        return [s for s in self._current().specs if s.vendor == vendor]

    # -- injection --------------------------------------------------------------------------

    def resolve(self, names: Iterable[str]) -> ContainerEdits:
        """The merged edits for ``names`` (spec-level edits first, each once per spec).

        Raises :class:`InvalidDeviceNamesError` naming every malformed name and why, else
        :class:`UnresolvableDevicesError` naming every unknown device.
        """
        names = list(names)
        problems = _name_problems(names)
        if problems:
            raise InvalidDeviceNamesError(problems)
        snap = self._current()
        unresolved: list[str] = []
        edits: list[ContainerEdits | None] = []
        seen_specs: set[str] = set()
        seen_devices: set[str] = set()
        for name in names:
            dev = snap.devices.get(name)
            if dev is None:
                unresolved.append(name)
                continue
            if name in seen_devices:
                continue
            seen_devices.add(name)
            if dev.spec.path not in seen_specs:
                seen_specs.add(dev.spec.path)
                edits.append(dev.spec.spec.container_edits)
            edits.append(dev.device.container_edits)
        if unresolved:
            raise UnresolvableDevicesError(unresolved)
        from podkit.cdi.edits import merge_edits

        return merge_edits(edits)

    def inject_devices(self, oci_spec: oci.Spec | None, names: Iterable[str]) -> list[str]:
        """Apply the edits of the named devices to ``oci_spec``; all or nothing.

        Returns the injected qualified names (duplicates removed). Malformed names raise
        :class:`InvalidDeviceNamesError`, unknown ones :class:`UnresolvableDevicesError`;
        edits that fail to apply raise :class:`InjectionError`. In each case ``oci_spec`` is
        unchanged.
        """
        if oci_spec is None:
            raise InvalidArgumentError("can't inject devices, nil OCI Spec")
        if not isinstance(oci_spec, oci.Spec):
            raise InvalidArgumentError(
                f"can't inject devices: expected podkit.oci.Spec, got {type(oci_spec).__name__}"
            )
        from podkit.cdi.edits import EditError, apply_edits

        requested = list(names)
        merged = self.resolve(requested)
        try:
            apply_edits(oci_spec, merged, stat=self._stat)
        except EditError as e:
            raise InjectionError(f"failed to inject devices: {e}") from e
        return list(dict.fromkeys(requested))

    # -- producers --------------------------------------------------------------------------

    def _target(self, name: str, what: str) -> str:
        if not self._dirs:
            raise InvalidArgumentError(f"no Spec directories to {what}")
        return os.path.join(self._dirs[-1], _check_spec_name(name))

    def write_spec(
        self, spec: Spec, name: str, *, cdi_version: str | None = None
    ) -> str:
        """Validate ``spec`` and write it atomically as ``name`` in the highest-priority dir.

        ``.json`` names are written as JSON, anything else as YAML (``.yaml`` is appended when
        the name has neither extension). ``cdiVersion`` is set to the minimum version the spec
        needs unless ``cdi_version`` says otherwise. The spec validators run first; if one
        rejects the spec nothing is written. Returns the path written.
        """
        from podkit.cdi.spec import (
            dump_spec,
            minimum_required_version,
            run_spec_validators,
            validate_spec,
        )

        path = self._target(name, "write to")
        version = cdi_version if cdi_version is not None else minimum_required_version(spec)
        spec = attrs.evolve(spec, cdi_version=version)
        try:
            run_spec_validators(spec, _validator.active(self._validator))
            validate_spec(spec)
        except SpecError as e:
            raise SpecError(f"Spec validation failed: {e.message}", field=e.field,
                            source=path) from None
        os.makedirs(self._dirs[-1], mode=0o755, exist_ok=True)
        try:
            _files.atomic_write(path, dump_spec(spec, path), mode=self._file_mode)
        except OSError as e:
            raise PodkitError(f'failed to write Spec file "{path}": {e}') from e
        return path

    def remove_spec(self, name: str) -> None:
        """Delete spec file ``name`` from the highest-priority dir; a missing file is fine."""
        path = self._target(name, "remove from")
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        except OSError as e:
            raise PodkitError(f'failed to remove Spec file "{path}": {e}') from e

