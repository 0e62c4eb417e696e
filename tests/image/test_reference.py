"""Reference parsing and normalisation, checked against Docker/containerd behaviour."""

from __future__ import annotations

import pytest

from podkit.image import ReferenceError, parse_reference
from podkit.image.reference import parse_digest

D = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("text", "full"),
    [
        ("busybox", "docker.io/library/busybox:latest"),
        ("busybox:1.36", "docker.io/library/busybox:1.36"),
        ("library/busybox", "docker.io/library/busybox:latest"),
        ("docker.io/busybox", "docker.io/library/busybox:latest"),
        ("index.docker.io/busybox", "docker.io/library/busybox:latest"),
        ("user/app", "docker.io/user/app:latest"),
        ("localhost/app", "localhost/app:latest"),
        ("localhost:5000/x:t", "localhost:5000/x:t"),
        ("127.0.0.1:5000/a/b/c:v1.0-rc_1", "127.0.0.1:5000/a/b/c:v1.0-rc_1"),
        ("quay.io/org/app@" + D, "quay.io/org/app@" + D),
        ("app:v1@" + D, "docker.io/library/app:v1@" + D),
        ("[::1]:5000/app", "[::1]:5000/app:latest"),
        ("my.registry/a__b/c--d.e", "my.registry/a__b/c--d.e:latest"),
    ],
)
def test_normalise(text: str, full: str) -> None:
    assert str(parse_reference(text)) == full


def test_parts_and_familiar() -> None:
    ref = parse_reference("busybox@" + D)
    assert (ref.domain, ref.path, ref.tag, ref.digest) == ("docker.io", "library/busybox", None, D)
    assert ref.object == D
    assert ref.familiar() == "busybox@" + D
    assert parse_reference("localhost:5000/x").familiar() == "localhost:5000/x:latest"
    assert str(parse_reference("busybox", default_tag=False)) == "docker.io/library/busybox"
    assert str(parse_reference("x").with_tag("v2")) == "docker.io/library/x:v2"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "non-empty"),
        ("UPPER", "lowercase"),
        ("docker.io/Library/busybox", "lowercase"),
        ("a/../b", "repository path"),
        ("app:", "bad tag"),
        ("app:-x", "bad tag"),
        ("app:" + "t" * 129, "bad tag"),
        ("app@sha256:abc", "algorithm:hex"),
        ("app@sha256:" + "A" * 64, "lowercase hex"),
        ("app@md5:" + "a" * 32, "unsupported algorithm"),
        ("a" * 64, "64-hex"),
        ("-bad.host/app", "bad registry domain"),
        ("host:port/app", "bad registry domain"),
        ("a/" + "b" * 300, "longer than 255"),
        ("app with space", "repository path"),
    ],
)
def test_invalid_references_name_the_input(text: str, fragment: str) -> None:
    with pytest.raises(ReferenceError) as err:
        parse_reference(text)
    assert fragment in str(err.value)
    if text:
        assert text[:20] in str(err.value)


def test_parse_digest() -> None:
    assert parse_digest(D) == D
    assert parse_digest("sha512:" + "0" * 128)
    with pytest.raises(ReferenceError, match=r"sha256 needs 64"):
        parse_digest("sha256:" + "a" * 63)
