"""Wire types: descriptors, manifests, indexes, platform matching."""

from __future__ import annotations

import json

import pytest

from podkit.image import Descriptor, ImageError, Platform, PlatformNotFoundError, host_platform
from podkit.image.descriptor import (
    MEDIA_TYPE_DOCKER_MANIFEST,
    MEDIA_TYPE_DOCKER_MANIFEST_LIST,
    layer_compression,
    parse_index,
    parse_manifest,
    select_platform,
)
from podkit.image.errors import UnsupportedMediaTypeError

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
D3 = "sha256:" + "3" * 64


def _desc(digest: str, os_: str | None = None, arch: str | None = None,
          variant: str | None = None) -> dict[str, object]:
    d: dict[str, object] = {"mediaType": MEDIA_TYPE_DOCKER_MANIFEST, "digest": digest, "size": 1}
    if os_:
        d["platform"] = {"os": os_, "architecture": arch,
                         **({"variant": variant} if variant else {})}
    return d


def test_descriptor_roundtrip_and_errors() -> None:
    data = {"mediaType": "x/y", "digest": D1, "size": 3, "annotations": {"a": "b"},
            "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}}
    desc = Descriptor.from_dict(data, "doc")
    assert desc.platform == Platform("linux", "arm64", "v8")
    assert desc.to_dict() == data
    with pytest.raises(ImageError, match=r"doc: descriptor sha256:1+ has invalid size -1"):
        Descriptor.from_dict({**data, "size": -1}, "doc")
    with pytest.raises(ImageError, match=r"doc: descriptor without digest"):
        Descriptor.from_dict({"mediaType": "x", "size": 1}, "doc")
    with pytest.raises(ImageError, match=r"only sha256"):
        Descriptor.from_dict({**data, "digest": "sha512:" + "0" * 128}, "doc")


def test_docker_manifest_and_list() -> None:
    man = {"schemaVersion": 2, "mediaType": MEDIA_TYPE_DOCKER_MANIFEST,
           "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                      "digest": D1, "size": 10},
           "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                       "digest": D2, "size": 20}]}
    parsed = parse_manifest(json.dumps(man).encode(), None, "m")
    assert parsed.config.digest == D1 and [layer.digest for layer in parsed.layers] == [D2]
    assert layer_compression(parsed.layers[0].media_type) == "gzip"
    index = {"schemaVersion": 2, "mediaType": MEDIA_TYPE_DOCKER_MANIFEST_LIST,
             "manifests": [_desc(D1, "linux", "arm", "v7"), _desc(D2, "linux", "amd64")]}
    parsed_index = parse_index(json.dumps(index).encode(), None, "i")
    assert select_platform(parsed_index, Platform("linux", "amd64"), "i").digest == D2
    with pytest.raises(UnsupportedMediaTypeError, match=r"m: unsupported manifest media type"):
        parse_manifest(json.dumps({**man, "mediaType": "text/plain"}).encode(), None, "m")
    with pytest.raises(ImageError, match=r"m: not valid JSON"):
        parse_manifest(b"{", None, "m")
    with pytest.raises(UnsupportedMediaTypeError, match=r"layer media type 'x/y' in L"):
        layer_compression("x/y", " in L")


def test_platform_selection_variants() -> None:
    index = parse_index(json.dumps({"schemaVersion": 2, "manifests": [
        _desc(D1, "linux", "arm", "v6"), _desc(D2, "linux", "arm", "v7"),
        _desc(D3, "linux", "arm64")]}).encode(), None, "i")
    assert select_platform(index, Platform("linux", "arm", "v7"), "i").digest == D2
    assert select_platform(index, Platform("linux", "arm64", "v8"), "i").digest == D3
    with pytest.raises(PlatformNotFoundError,
                       match=r"i: no image for platform windows/amd64 \(available: linux/arm/v6"):
        select_platform(index, Platform("windows", "amd64"), "i")
    untyped = parse_index(json.dumps({"schemaVersion": 2, "manifests": [_desc(D1)]}).encode(),
                          None, "i")
    assert select_platform(untyped, Platform("linux", "s390x"), "i").digest == D1


def test_platform_parse_and_host() -> None:
    assert str(Platform.parse("linux/arm64/v8")) == "linux/arm64/v8"
    assert Platform.parse("linux/amd64").variant is None
    with pytest.raises(ImageError, match=r"invalid platform 'linux'"):
        Platform.parse("linux")
    here = host_platform()
    assert here.os == "linux" and here.architecture in {"amd64", "arm64", "arm", "386",
                                                        "ppc64le", "s390x", "riscv64"}
