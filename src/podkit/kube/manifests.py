"""Load Kubernetes manifests: YAML multi-document files, with each field's file:line:column.

Parsing keeps the node marks PyYAML composes, so a later error about ``spec.containers[1].name``
can point at the line in the file. ConfigMap and Secret documents (in the files or given on their
own) are collected by namespace and name for volumes and env.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import yaml

from podkit.errors import InvalidArgumentError, quote

__all__ = [
    "POD_KINDS",
    "ConfigData",
    "Document",
    "ManifestError",
    "Manifests",
    "check_document",
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


@attrs.frozen
class Document:
    """One YAML document: its plain value and where each field path came from."""

    path: str
    index: int
    body: dict[str, Any]
    marks: Mapping[str, tuple[int, int]] = attrs.field(factory=dict)  # field path -> line, col

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


def _parent(field: str) -> str:
    if field.endswith("]"):
        return field[: field.rindex("[")]
    return field.rpartition(".")[0]


def _child(prefix: str, key: object) -> str:
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    return f"{prefix}.{key}" if prefix else str(key)


def _record_marks(node: yaml.Node, prefix: str, marks: dict[str, tuple[int, int]]) -> None:
    marks[prefix] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                _record_marks(value, _child(prefix, key.value), marks)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _record_marks(item, _child(prefix, i), marks)


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
            body = loader.construct_document(node)
            if body is None:
                index += 1
                continue
            if not isinstance(body, dict):
                line, col = node.start_mark.line + 1, node.start_mark.column + 1
                raise ManifestError(
                    f"{path}:{line}:{col}: document {index} is a {type(body).__name__}, "
                    "not a mapping with apiVersion and kind")
            marks: dict[str, tuple[int, int]] = {}
            _record_marks(node, "", marks)
            docs.append(Document(path=path, index=index, body=body, marks=marks))
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
        raise ManifestError(f"cannot read manifest {str(path)!r}: {err.strerror}") from None
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
) -> Manifests:
    """Read manifest files (``-`` is not special); ConfigMaps and Secrets may come separately."""
    docs: list[Document] = []
    for path in paths:
        docs.extend(parse_manifests(_read(path), str(path)))
    docs.extend(_extra(configmap_files, "ConfigMap"))
    docs.extend(_extra(secret_files, "Secret"))
    return manifests_from(docs)


def manifests_from(docs: Iterable[Document]) -> Manifests:
    """Sort parsed documents into pods, ConfigMaps and Secrets."""
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
    return Manifests(tuple(pods), config_maps, secrets)
