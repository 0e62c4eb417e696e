"""podkit.image.lookup: every form a string may name a stored image in, tried in containerd's
order (full digest, name, ID prefix), over records made here; then the same through a real
``ImageStore`` (``resolve``, ``get``, ``remove``) on imported images."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from image.imagebuild import Layer, build_image, write_layout
from podkit.image import (
    AmbiguousImageError,
    Descriptor,
    Image,
    ImageNotFoundError,
    ImageQuery,
    ImageStore,
    ReferenceError,
    import_image,
    parse_reference,
)
from podkit.image.lookup import MIN_ID_PREFIX

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"


def _digest(seed: str) -> str:
    return "sha256:" + hashlib.sha256(seed.encode()).hexdigest()


def _record(name: str, config: str, manifest: str, target: str | None = None) -> Image:
    """A record named ``name`` (normalised here) with the given config/manifest/target."""
    man = Descriptor(OCI_MANIFEST, manifest, 100)
    tgt = Descriptor(OCI_INDEX, target, 200) if target else man
    return Image(str(parse_reference(name)), tgt, man, Descriptor(OCI_CONFIG, config, 10), (),
                 (), None, "")


APP_ID = _digest("app config")
APP_MANIFEST = _digest("app manifest")
APP_INDEX = _digest("app index")
OTHER_ID = _digest("other config")
RECORDS = [
    _record("registry.test:5000/team/app:v1", APP_ID, APP_MANIFEST, APP_INDEX),
    _record("registry.test:5000/team/app:stable", APP_ID, APP_MANIFEST, APP_INDEX),
    _record("busybox", OTHER_ID, _digest("busybox manifest")),
    _record("user/x", OTHER_ID, _digest("busybox manifest")),
]
APP = ["registry.test:5000/team/app:stable", "registry.test:5000/team/app:v1"]
OTHER = ["docker.io/library/busybox:latest", "docker.io/user/x:latest"]


def _names(text: str) -> list[str]:
    return [r.name for r in ImageQuery.parse(text).match(RECORDS)]


@pytest.mark.parametrize(("text", "names"), [
    # names, normalised the docker way
    ("registry.test:5000/team/app:v1", APP[1:]),
    ("busybox", OTHER[:1]),
    ("busybox:latest", OTHER[:1]),
    ("library/busybox", OTHER[:1]),
    ("docker.io/busybox", OTHER[:1]),
    ("index.docker.io/library/busybox:latest", OTHER[:1]),
    ("user/x", OTHER[1:]),
    ("docker.io/user/x:latest", OTHER[1:]),
    # a repository and a digest (its index or its manifest); a tag beside it is ignored
    (f"registry.test:5000/team/app@{APP_INDEX}", APP),
    (f"registry.test:5000/team/app@{APP_MANIFEST}", APP),
    (f"registry.test:5000/team/app:v1@{APP_INDEX}", APP),
    (f"registry.test:5000/team/app:nosuchtag@{APP_INDEX}", APP),
    (f"busybox@{_digest('busybox manifest')}", OTHER[:1]),
    # the image ID, with and without sha256:, and prefixes of it
    (APP_ID, APP),
    (APP_ID[7:], APP),
    (APP_ID[7:19], APP),
    (APP_ID[:19], APP),
    (APP_ID[7:7 + MIN_ID_PREFIX], APP),
    (APP_ID[7:70], APP),
    # an index or manifest digest alone
    (APP_INDEX, APP),
    (APP_MANIFEST, APP),
])
def test_every_form_names_the_image(text: str, names: list[str]) -> None:
    assert _names(text) == names


@pytest.mark.parametrize("text", [
    "registry.test:5000/team/app:v2",                       # another tag
    f"registry.test:5000/other/app@{APP_INDEX}",            # the digest in another repository
    f"registry.test:5000/team/app@{_digest('nothing')}",    # another digest
    "0" * 64, "sha256:" + "0" * 64,                          # IDs of nothing
    APP_ID[7:7 + MIN_ID_PREFIX - 1], APP_ID[:7 + MIN_ID_PREFIX - 1],   # too short a prefix
    APP_ID[7:8], "sha256:",
    "sha256:" + APP_ID[7:19].upper(),                        # a name (sha256, a tag)
    APP_ID[7:] + "0",                                        # 65 hex digits: a name
    "a" * 300,                                               # hex, but neither
])
def test_what_names_nothing(text: str) -> None:
    assert _names(text) == []


@pytest.mark.parametrize("text", [
    "", "Not A/Ref!!", "docker.io/UPPER/case", "registry.test/app@sha256:abc", "app:", "z" * 300,
    "busybox@" + APP_ID[7:], APP_ID[7:19].upper(),
])
def test_what_can_name_nothing_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ReferenceError, match="invalid") as info:
        ImageQuery.parse(text)
    assert repr(text)[:50] in str(info.value)


def test_a_name_wins_over_an_id_prefix() -> None:
    prefix = OTHER_ID[7:15]
    named = _record(prefix, APP_ID, APP_MANIFEST)  # an image whose *name* is that hex
    assert [r.name for r in ImageQuery.parse(prefix).match([*RECORDS, named])] == [named.name]
    assert _names(prefix) == OTHER


def test_a_full_digest_is_never_a_name() -> None:
    # "sha256:<hex>" is also the name docker.io/library/sha256 with a tag: the ID comes first
    named = _record(f"sha256:{APP_ID[7:]}", OTHER_ID, APP_MANIFEST)
    assert named.name == f"docker.io/library/sha256:{APP_ID[7:]}"
    assert [r.config.digest for r in ImageQuery.parse(APP_ID).match([*RECORDS, named])] == \
        [APP_ID, APP_ID]


def test_an_ambiguous_prefix_says_how_many_images() -> None:
    ids = [_digest(f"x{n}") for n in range(3)]
    ids = ["sha256:abcdef" + d[13:] for d in ids]
    records = [_record(f"x/n{n}", d, _digest(f"m{n}")) for n, d in enumerate(ids)]
    for text in ("abcdef", "sha256:abcdef"):
        with pytest.raises(AmbiguousImageError, match=r"abcdef' is ambiguous: 3 images") as info:
            ImageQuery.parse(text).match(records)
        assert isinstance(info.value, ReferenceError)
    longer = ids[0][7:20]
    assert [r.name for r in ImageQuery.parse(longer).match(records)] == [records[0].name]
    # several names of one image are not an ambiguity
    assert len(ImageQuery.parse(APP_ID[7:13]).match(RECORDS)) == 2


def test_query_fields() -> None:
    q = ImageQuery.parse("abcdef12")
    assert (q.digest, str(q.reference), q.id_prefix) == (
        None, "docker.io/library/abcdef12:latest", "abcdef12")
    q = ImageQuery.parse(f"a/b:t@{APP_ID}")
    assert (str(q.reference), q.id_prefix) == (f"docker.io/a/b@{APP_ID}", None)
    assert ImageQuery.parse("0" * 64).digest == "sha256:" + "0" * 64
    ref = parse_reference(f"a/b:t@{APP_ID}")
    assert str(ImageQuery.parse(ref).reference) == f"docker.io/a/b@{APP_ID}"


# -- the store: the same forms through resolve, get and remove -------------------------------


@pytest.fixture
def two_images(store: ImageStore, tmp_path: Path) -> tuple[ImageStore, str, str]:
    """``localhost/pk/app:v1`` (also ``:v2``) and ``busybox`` (``docker.io/library/...``);
    returns the store and the two image IDs."""
    ids = []
    for n, names in enumerate((["localhost/pk/app:v1", "localhost/pk/app:v2"], ["busybox:latest"])):
        img = build_image([Layer().file("f", f"image {n}".encode()).bytes()], [""],
                          {"Env": [f"N={n}"]})
        layout = write_layout(tmp_path / f"layout{n}", [(img.descriptor, "1")], img.blobs)
        for name in names:
            import_image(store, layout, name)
        ids.append(img.manifest["config"]["digest"])
    return store, ids[0], ids[1]


def test_store_resolves_every_form(two_images: tuple[ImageStore, str, str]) -> None:
    store, app_id, bb_id = two_images
    app = store.get("localhost/pk/app:v1")
    digest = app.target.digest
    for text in ("localhost/pk/app:v1", f"localhost/pk/app@{digest}",
                 f"localhost/pk/app:v1@{digest}", app_id, app_id[7:], app_id[7:19],
                 app_id[:19], digest):
        assert store.get(text).config.digest == app_id, text
    assert [i.name for i in store.resolve(app_id[7:19])] == ["localhost/pk/app:v1",
                                                             "localhost/pk/app:v2"]
    for text in ("busybox", "docker.io/library/busybox:latest", "library/busybox", bb_id[7:13]):
        assert store.get(text).config.digest == bb_id, text
    assert store.config(app_id[7:19]).env == ("N=0",)


def test_store_not_found_says_what_was_looked_for(two_images: tuple[ImageStore, str, str],
                                                  ) -> None:
    store, app_id, _ = two_images
    with pytest.raises(ImageNotFoundError, match=r"image docker.io/library/nope:latest not f"):
        store.get("nope")
    with pytest.raises(ImageNotFoundError, match=r"nor an image ID starting with 0000000"):
        store.get("0000000")
    with pytest.raises(ImageNotFoundError, match=r"image sha256:0{64} not found"):
        store.get("0" * 64)
    with pytest.raises(ImageNotFoundError, match=r"at least 6 hex digits"):
        store.get("sha256:")
    with pytest.raises(ImageNotFoundError):
        store.get(app_id[7:12])  # five digits: no guess
    with pytest.raises(ReferenceError, match=r"invalid reference 'Not A/Ref!!'"):
        store.get("Not A/Ref!!")


def test_store_remove_forgets_what_the_form_names(two_images: tuple[ImageStore, str, str],
                                                  ) -> None:
    store, app_id, bb_id = two_images
    assert [i.name for i in store.remove("localhost/pk/app:v2")] == ["localhost/pk/app:v2"]
    store.tag("localhost/pk/app:v1", "localhost/pk/app:v2")
    # an ID prefix names the image: every name of it goes
    assert [i.name for i in store.remove(app_id[7:19])] == ["localhost/pk/app:v1",
                                                            "localhost/pk/app:v2"]
    with pytest.raises(ImageNotFoundError):
        store.remove(app_id)
    assert [i.config.digest for i in store.list()] == [bb_id]
    bb = store.get("busybox")
    assert store.remove(f"docker.io/library/busybox@{bb.target.digest}") == [bb]
    assert store.list() == []
    store.put(bb)  # back: every form finds it again
    assert store.get(bb_id[7:13]) == bb and store.get("busybox") == bb
