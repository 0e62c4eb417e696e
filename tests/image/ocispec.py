"""The OCI image-layout and image-spec rules an image must meet, checked on a layout directory.

Written from the specification text (image-layout.md, image-index.md, manifest.md, config.md,
descriptor.md, layer.md of opencontainers/image-spec v1.1), independent of podkit: what
``ctr images import``, ``podman load`` and ``skopeo`` rely on when they read a layout.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
from pathlib import Path
from typing import Any

_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
MEDIA_TYPE = re.compile(f"^{_NAME}/{_NAME}$")
DIGEST = re.compile(r"^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$")
SHA256 = re.compile(r"^sha256:[a-f0-9]{64}$")
INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYERS = {"application/vnd.oci.image.layer.v1.tar": "",
          "application/vnd.oci.image.layer.v1.tar+gzip": "gzip"}
ENV = re.compile(r"^[^=]+=.*$", re.S)


def _descriptor(d: Any, where: str, problems: list[str]) -> bool:
    if not isinstance(d, dict):
        problems.append(f"{where}: not an object")
        return False
    ok = True
    if not isinstance(d.get("mediaType"), str) or not MEDIA_TYPE.match(d["mediaType"]):
        problems.append(f"{where}.mediaType: {d.get('mediaType')!r} is not a media type")
        ok = False
    if not isinstance(d.get("digest"), str) or not DIGEST.match(d["digest"]):
        problems.append(f"{where}.digest: {d.get('digest')!r} is not a digest")
        ok = False
    elif d["digest"].startswith("sha256:") and not SHA256.match(d["digest"]):
        problems.append(f"{where}.digest: sha256 wants 64 lowercase hex digits")
        ok = False
    if type(d.get("size")) is not int or d["size"] < 0:
        problems.append(f"{where}.size: {d.get('size')!r} is not a size")
        ok = False
    ann = d.get("annotations", {})
    if not isinstance(ann, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                            for k, v in ann.items()):
        problems.append(f"{where}.annotations: not a map of strings")
    plat = d.get("platform")
    if plat is not None and not (isinstance(plat, dict) and isinstance(plat.get("os"), str)
                                 and isinstance(plat.get("architecture"), str)):
        problems.append(f"{where}.platform: needs os and architecture strings")
    return ok


def _blob(root: Path, d: dict[str, Any], where: str, problems: list[str]) -> bytes | None:
    algorithm, _, encoded = d["digest"].partition(":")
    path = root / "blobs" / algorithm / encoded
    if not path.is_file():
        problems.append(f"{where}: blob {path.relative_to(root)} is missing")
        return None
    data = path.read_bytes()
    if len(data) != d["size"]:
        problems.append(f"{where}: size {d['size']} but the blob has {len(data)} bytes")
    if algorithm == "sha256" and "sha256:" + hashlib.sha256(data).hexdigest() != d["digest"]:
        problems.append(f"{where}: the blob's content does not match its digest")
    return data


def _json(data: bytes, where: str, problems: list[str]) -> Any:
    try:
        return json.loads(data)
    except ValueError as exc:
        problems.append(f"{where}: not JSON: {exc}")
        return None


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def config_problems(doc: Any, where: str = "config") -> list[str]:
    """config.md: the required fields and the types of the execution parameters."""
    problems: list[str] = []
    if not isinstance(doc, dict):
        return [f"{where}: not an object"]
    for key in ("architecture", "os"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            problems.append(f"{where}.{key}: required string")
    rootfs = doc.get("rootfs")
    if not isinstance(rootfs, dict) or rootfs.get("type") != "layers" or \
            not _strings(rootfs.get("diff_ids")):
        problems.append(f"{where}.rootfs: wants type 'layers' and a list of diff_ids")
    elif not all(DIGEST.match(d) for d in rootfs["diff_ids"]):
        problems.append(f"{where}.rootfs.diff_ids: not digests")
    if "created" in doc and not (isinstance(doc["created"], str) and re.match(
            r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$", doc["created"])):
        problems.append(f"{where}.created: not an RFC 3339 date-time")
    cfg = doc.get("config", {})
    if not isinstance(cfg, dict):
        return [*problems, f"{where}.config: not an object"]
    for key in ("User", "WorkingDir", "StopSignal"):
        if key in cfg and not isinstance(cfg[key], str):
            problems.append(f"{where}.config.{key}: not a string")
    for key in ("Entrypoint", "Cmd"):
        if key in cfg and cfg[key] is not None and not _strings(cfg[key]):
            problems.append(f"{where}.config.{key}: not a list of strings")
    if "Env" in cfg and not (_strings(cfg["Env"]) and all(ENV.match(e) for e in cfg["Env"])):
        problems.append(f"{where}.config.Env: not a list of VARNAME=VARVALUE")
    for key in ("ExposedPorts", "Volumes"):
        if key in cfg and cfg[key] is not None and not (
                isinstance(cfg[key], dict) and all(v == {} for v in cfg[key].values())):
            problems.append(f"{where}.config.{key}: not a map of empty objects")
    if "Labels" in cfg and cfg["Labels"] is not None and not (
            isinstance(cfg["Labels"], dict)
            and all(isinstance(v, str) for v in cfg["Labels"].values())):
        problems.append(f"{where}.config.Labels: not a map of strings")
    history = doc.get("history", [])
    if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
        problems.append(f"{where}.history: not a list of objects")
    return problems


def layer_problems(data: bytes, media_type: str, where: str) -> tuple[list[str], str]:
    """layer.md: a tar (compressed as the media type says) of relative, clean paths, each
    once, links to earlier entries; and its diff ID (the uncompressed digest)."""
    problems: list[str] = []
    raw = gzip.decompress(data) if LAYERS.get(media_type) == "gzip" else data
    seen: set[str] = set()
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
        for member in tar.getmembers():
            name = member.name.rstrip("/")
            parts = name.split("/")
            if member.name.startswith("/") or ".." in parts or "" in parts or "." in parts:
                problems.append(f"{where}: entry {member.name!r} is not a clean relative path")
            if name in seen:
                problems.append(f"{where}: entry {name!r} appears twice")
            seen.add(name)
            if member.islnk() and member.linkname.rstrip("/") not in seen:
                problems.append(f"{where}: hardlink {name!r} to {member.linkname!r}, which no "
                                "earlier entry has")
            if not (member.isreg() or member.isdir() or member.issym() or member.islnk()
                    or member.ischr() or member.isblk() or member.isfifo()):
                problems.append(f"{where}: entry {name!r} of a type layers do not hold")
    return problems, "sha256:" + hashlib.sha256(raw).hexdigest()


def layout_problems(root: Path) -> list[str]:
    """Every rule of the image layout at ``root`` (and of the images it holds) it breaks."""
    problems: list[str] = []
    try:
        layout = json.loads((root / "oci-layout").read_text())
    except (OSError, ValueError) as exc:
        return [f"oci-layout: {exc}"]
    if not isinstance(layout, dict) or not isinstance(layout.get("imageLayoutVersion"), str):
        problems.append("oci-layout: imageLayoutVersion is required")
    index = _json((root / "index.json").read_bytes(), "index.json", problems)
    if not isinstance(index, dict) or index.get("schemaVersion") != 2 or \
            not isinstance(index.get("manifests"), list):
        return [*problems, "index.json: wants schemaVersion 2 and a manifests list"]
    if index.get("mediaType", INDEX) != INDEX:
        problems.append(f"index.json: mediaType {index['mediaType']!r}")
    for i, entry in enumerate(index["manifests"]):
        where = f"index.json manifests[{i}]"
        if not _descriptor(entry, where, problems):
            continue
        if entry["mediaType"] != MANIFEST:
            problems.append(f"{where}: mediaType {entry['mediaType']!r}: want an image manifest")
            continue
        manifest = _json(_blob(root, entry, where, problems) or b"null", where, problems)
        problems += manifest_problems(root, manifest, f"manifest {entry['digest'][:19]}")
    return problems


def manifest_problems(root: Path, manifest: Any, where: str) -> list[str]:
    """manifest.md, and its config and layers (config.md, layer.md)."""
    problems: list[str] = []
    if not isinstance(manifest, dict) or manifest.get("schemaVersion") != 2:
        return [f"{where}: wants schemaVersion 2"]
    if manifest.get("mediaType") != MANIFEST:
        problems.append(f"{where}: mediaType {manifest.get('mediaType')!r}")
    layers = manifest.get("layers")
    if not isinstance(layers, list) or not layers:
        problems.append(f"{where}: layers must hold at least one descriptor")
        layers = []
    config = manifest.get("config")
    if not _descriptor(config, f"{where}.config", problems):
        return problems
    if config["mediaType"] != CONFIG:
        problems.append(f"{where}.config: mediaType {config['mediaType']!r}")
    doc = _json(_blob(root, config, f"{where}.config", problems) or b"null", f"{where}.config",
                problems)
    problems += config_problems(doc, f"{where} config")
    diff_ids = []
    for i, layer in enumerate(layers):
        lw = f"{where}.layers[{i}]"
        if not _descriptor(layer, lw, problems):
            continue
        if layer["mediaType"] not in LAYERS:
            problems.append(f"{lw}: mediaType {layer['mediaType']!r}")
            continue
        data = _blob(root, layer, lw, problems)
        if data is not None:
            more, diff_id = layer_problems(data, layer["mediaType"], lw)
            problems += more
            diff_ids.append(diff_id)
    if isinstance(doc, dict) and isinstance(doc.get("rootfs"), dict) and \
            doc["rootfs"].get("diff_ids") != diff_ids:
        problems.append(f"{where}: config rootfs.diff_ids {doc['rootfs'].get('diff_ids')} are "
                        f"not the layers' uncompressed digests {diff_ids}")
    return problems
