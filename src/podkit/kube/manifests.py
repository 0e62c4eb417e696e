"""Load Kubernetes manifests: YAML multi-document files, with each field's file:line:column.

Parsing keeps the node marks PyYAML composes, so a later error about ``spec.containers[1].name``
can point at the line in the file. Loading is strict, as kubectl's: a name that is no field of
its object (``initContianers``) or a field given twice is an error listing every one with its
place and the field meant (``lenient=True``: warnings). ConfigMap and Secret documents (in the
files or given on their own) are collected by namespace and name for volumes and env.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import yaml

from podkit.errors import InvalidArgumentError, NotFoundError, quote
from podkit.kube.fields import DOCUMENT_FIELDS, unknown_fields

__all__ = [
    "POD_KINDS",
    "ConfigData",
    "Document",
    "ManifestError",
    "ManifestNotFoundError",
    "Manifests",
    "check_document",
    "field_problems",
    "load_manifests",
    "manifests_from",
    "parse_manifests",
]

# kind -> apiVersion for the documents that describe a pod (directly or as a template).
POD_KINDS: dict[str, str] = {
    "Pod": "v1",
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Job": "batch/v1",
}
_DATA_KINDS = {"ConfigMap": "v1", "Secret": "v1"}


class ManifestError(InvalidArgumentError):
    """A manifest file that cannot be read or does not have a document's shape."""


class ManifestNotFoundError(ManifestError, NotFoundError):
    """A manifest file that does not exist."""


@attrs.frozen
class Document:
    """One YAML document: its plain value and where each field path came from."""

    path: str
    index: int
    body: dict[str, Any]
    marks: Mapping[str, tuple[int, int]] = attrs.field(factory=dict)  # field path -> line, col
    key_marks: Mapping[str, tuple[int, int]] = attrs.field(factory=dict)  # of the field's key
    duplicates: tuple[str, ...] = ()  # field paths given twice (the later value counts)

    @property
    def kind(self) -> str:
        return str(self.body.get("kind", ""))

    @property
    def name(self) -> str:
        meta = self.body.get("metadata")
        return str(meta.get("name", "")) if isinstance(meta, dict) else ""

    @property
    def source(self) -> str:
        """``file.yaml#index (Kind/name)``, how plans and errors name the document."""
        return f"{self.path}#{self.index} ({self.kind}/{self.name})"

    def where(self, field: str) -> str:
        """``file:line:column`` of a field path (or of its nearest parent that has a mark)."""
        probe = field
        while probe:
            if probe in self.marks:
                line, col = self.marks[probe]
                return f"{self.path}:{line}:{col}"
            probe = _parent(probe)
        line, col = self.marks.get("", (1, 1))
        return f"{self.path}:{line}:{col}"

    def where_key(self, field: str) -> str:
        """``file:line:column`` of a field's name (of its value when it has no name there)."""
        if field in self.key_marks:
            line, col = self.key_marks[field]
            return f"{self.path}:{line}:{col}"
        return self.where(field)


@attrs.frozen
class ConfigData:
    """A ConfigMap's or Secret's key -> bytes, with where it was defined."""

    kind: str
    namespace: str
    name: str
    data: Mapping[str, bytes]
    source: str


@attrs.frozen
class Manifests:
    """Everything loaded: the pod-bearing documents and the ConfigMaps and Secrets by name."""

    documents: tuple[Document, ...]
    config_maps: Mapping[tuple[str, str], ConfigData] = attrs.field(factory=dict)
    secrets: Mapping[tuple[str, str], ConfigData] = attrs.field(factory=dict)
    warnings: tuple[str, ...] = ()  # loaded leniently: the unknown and duplicate fields


def _parent(field: str) -> str:
    if field.endswith("]"):
        return field[: field.rindex("[")]
    return field.rpartition(".")[0]


def _child(prefix: str, key: object) -> str:
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    return f"{prefix}.{key}" if prefix else str(key)


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


MAX_FIELDS = 100_000
"""The most fields a document may have, aliases expanded (a manifest has hundreds)."""


@attrs.define
class _Marks:
    """What one walk over a document's nodes finds; an alias that contains itself, or more
    than :data:`MAX_FIELDS` fields once aliases are expanded, is refused."""

    path: str
    values: dict[str, tuple[int, int]] = attrs.field(factory=dict)
    keys: dict[str, tuple[int, int]] = attrs.field(factory=dict)
    duplicates: list[str] = attrs.field(factory=list)
    _open: set[int] = attrs.field(factory=set)  # the nodes being walked (ids)

    def record(self, node: yaml.Node, prefix: str) -> None:
        mark = _mark(node)
        if id(node) in self._open:
            raise ManifestError(f"{self.path}:{mark[0]}:{mark[1]}: {prefix or 'the document'} "
                                "contains itself (alias)")
        if len(self.values) >= MAX_FIELDS:
            raise ManifestError(f"{self.path}:{mark[0]}:{mark[1]}: more than {MAX_FIELDS} "
                                "fields (aliases expanded)")
        self.values[prefix] = mark
        self._open.add(id(node))
        try:
            self._children(node, prefix)
        finally:
            self._open.discard(id(node))

    def _children(self, node: yaml.Node, prefix: str) -> None:
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                    continue
                here = _child(prefix, key.value)
                if key.value in seen:
                    self.duplicates.append(here)
                seen.add(key.value)
                self.keys[here] = _mark(key)
                self.record(value, here)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self.record(item, _child(prefix, i))


def _yaml_error(path: str, err: yaml.YAMLError) -> ManifestError:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    context = getattr(err, "context", None)
    what = f"{context}: {problem}" if context else problem
    if mark is None:
        return ManifestError(f"{path}: invalid YAML: {what}")
    return ManifestError(f"{path}:{mark.line + 1}:{mark.column + 1}: invalid YAML: {what}")


def _documents(text: str, path: str) -> list[Document]:
    docs: list[Document] = []
    loader = yaml.SafeLoader(text)
    try:
        index = 0
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            marks = _Marks(path)  # before constructing: that merges ``<<`` keys into the node
            marks.record(node, "")
            body = loader.construct_document(node)
            if body is None:
                index += 1
                continue
            if not isinstance(body, dict):
                line, col = node.start_mark.line + 1, node.start_mark.column + 1
                raise ManifestError(
                    f"{path}:{line}:{col}: document {index} is a {type(body).__name__}, "
                    "not a mapping with apiVersion and kind")
            docs.append(Document(path=path, index=index, body=body, marks=marks.values,
                                 key_marks=marks.keys, duplicates=tuple(marks.duplicates)))
            index += 1
    except yaml.YAMLError as err:
        raise _yaml_error(path, err) from None
    finally:
        loader.dispose()
    return docs


def check_document(doc: Document) -> None:
    """Refuse a document of a kind (or apiVersion) podkit does not read, or without a name."""
    kind = doc.body.get("kind")
    api = doc.body.get("apiVersion")
    known = {**POD_KINDS, **_DATA_KINDS}
    if not isinstance(kind, str) or kind not in known:
        raise ManifestError(
            f"{doc.where('kind')}: kind {quote(kind)} is not supported "
            f"(supported: {', '.join(sorted(known))})")
    if api != known[kind]:
        raise ManifestError(
            f"{doc.where('apiVersion')}: apiVersion {quote(api)} for kind {kind}: "
            f"expected {known[kind]!r}")
    meta = doc.body.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ManifestError(f"{doc.where('metadata.name')}: {kind} has no metadata.name")


def _data_bytes(doc: Document) -> dict[str, bytes]:
    """A ConfigMap's data and binaryData, or a Secret's data (base64) and stringData."""
    body = doc.body
    out: dict[str, bytes] = {}
    fields = (("data", "binaryData") if doc.kind == "ConfigMap" else ("data", "stringData"))
    for field in fields:
        section = body.get(field) or {}
        if not isinstance(section, dict):
            raise ManifestError(f"{doc.where(field)}: {field} must be a mapping")
        for key, value in section.items():
            where = doc.where(f"{field}.{key}")
            if not isinstance(value, str):
                raise ManifestError(f"{where}: {field}.{key} must be a string, got {quote(value)}")
            out[str(key)] = _decode(field, doc.kind, str(key), value, where)
    return out


def _decode(field: str, kind: str, key: str, value: str, where: str) -> bytes:
    if (kind, field) in (("ConfigMap", "binaryData"), ("Secret", "data")):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ManifestError(f"{where}: {field}.{key} is not valid base64") from None
    return value.encode()


def parse_manifests(text: str, path: str = "<string>") -> list[Document]:
    """The documents of one YAML text, kinds checked; ``path`` names it in errors."""
    docs = _documents(text, path)
    for doc in docs:
        check_document(doc)
    return docs


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text()
    except OSError as err:
        kind = ManifestNotFoundError if isinstance(err, FileNotFoundError) else ManifestError
        raise kind(f"cannot read manifest {str(path)!r}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ManifestError(f"manifest {str(path)!r} is not UTF-8 text") from None


def _add_data(doc: Document, table: dict[tuple[str, str], ConfigData]) -> None:
    meta = doc.body["metadata"]
    namespace = str(meta.get("namespace") or "default")
    key = (namespace, doc.name)
    if key in table:
        raise ManifestError(
            f"{doc.where('metadata.name')}: {doc.kind} {namespace}/{doc.name} is defined twice "
            f"(also in {table[key].source})")
    table[key] = ConfigData(doc.kind, namespace, doc.name, _data_bytes(doc), doc.source)


def _extra(paths: Iterable[str | Path], kind: str) -> list[Document]:
    found = []
    for path in paths:
        for doc in parse_manifests(_read(path), str(path)):
            if doc.kind != kind:
                raise ManifestError(
                    f"{doc.where('kind')}: expected a {kind} in {str(path)!r}, found {doc.kind}")
            found.append(doc)
    return found


def load_manifests(
    paths: Iterable[str | Path],
    *,
    configmap_files: Iterable[str | Path] = (),
    secret_files: Iterable[str | Path] = (),
    lenient: bool = False,
) -> Manifests:
    """Read manifest files (``-`` is not special); ConfigMaps and Secrets may come separately.
    Unknown and duplicate fields are refused (``lenient``: listed in ``warnings``)."""
    docs: list[Document] = []
    for path in paths:
        docs.extend(parse_manifests(_read(path), str(path)))
    docs.extend(_extra(configmap_files, "ConfigMap"))
    docs.extend(_extra(secret_files, "Secret"))
    return manifests_from(docs, lenient=lenient)


def field_problems(doc: Document) -> list[str]:
    """``file:line:column: path: problem`` for every field of ``doc`` that its kind does not
    have (with the field meant, when one is close) and every field given twice, in file
    order."""
    found = [(doc.key_marks.get(p, (0, 0)), f"{doc.where_key(p)}: {p}: duplicate field")
             for p in doc.duplicates]
    for path, near in unknown_fields(doc.body, DOCUMENT_FIELDS.get(doc.kind, {})):
        hint = f", did you mean {near!r}?" if near else ""
        found.append((doc.key_marks.get(path, (0, 0)),
                      f"{doc.where_key(path)}: {path}: unknown field{hint}"))
    return [text for _, text in sorted(found, key=lambda f: f[0])]


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def _check_fields(docs: list[Document], lenient: bool) -> tuple[str, ...]:
    """Every document's field problems: refused (one line each), or with ``lenient`` the
    warnings."""
    per_doc = [(doc, field_problems(doc)) for doc in docs]
    problems = [line for _, lines in per_doc for line in lines]
    if not problems or lenient:
        return tuple(problems)
    files = ", ".join(dict.fromkeys(doc.path for doc, lines in per_doc if lines))
    dups = sum(len(doc.duplicates) for doc in docs)
    counts = [_count(len(problems) - dups, "unknown field")] if len(problems) > dups else []
    counts += [_count(dups, "duplicate field")] if dups else []
    raise ManifestError(f"{files}: {', '.join(counts)}:\n"
                        + "\n".join(f"  {line}" for line in problems))


def manifests_from(docs: Iterable[Document], *, lenient: bool = False) -> Manifests:
    """Sort parsed documents into pods, ConfigMaps and Secrets, their fields checked: a
    :class:`ManifestError` lists every unknown or duplicate field (``lenient``: warnings)."""
    docs = list(docs)
    warnings = _check_fields(docs, lenient)
    pods: list[Document] = []
    config_maps: dict[tuple[str, str], ConfigData] = {}
    secrets: dict[tuple[str, str], ConfigData] = {}
    for doc in docs:
        if doc.kind == "ConfigMap":
            _add_data(doc, config_maps)
        elif doc.kind == "Secret":
            _add_data(doc, secrets)
        else:
            pods.append(doc)
    return Manifests(tuple(pods), config_maps, secrets, warnings)
