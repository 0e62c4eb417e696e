"""Unpack into overlay-format snapshots; rootfs by overlay mount and by copy; hostile layers.

Needs root (ownership, device nodes, ``trusted.*`` xattrs, overlay mounts): run via
``scripts/isolated`` so mounts stay in a private mount namespace.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tarfile
from pathlib import Path

import pytest

from image.imagebuild import (
    BuiltImage,
    Layer,
    build_image,
    sha,
    tree,
    write_layout,
)
from podkit.errors import AlreadyExistsError
from podkit.image import (
    DigestMismatchError,
    ImageError,
    ImageStore,
    UnsafeLayerError,
    UnsupportedMediaTypeError,
    create_rootfs,
    get_rootfs,
    import_image,
    list_rootfs,
    overlay_supported,
    remove_rootfs,
    unmount_rootfs,
    unpack,
)
from podkit.image.unpack import OPAQUE_XATTR
from support import require_isolated, require_root

pytestmark = pytest.mark.integration


def _load(store: ImageStore, img: BuiltImage, tmp_path: Path, name: str) -> str:
    layout = write_layout(tmp_path / f"layout-{name.replace('/', '_')}",
                          [(img.descriptor, "v1")], img.blobs)
    import_image(store, layout, f"localhost/{name}")
    return f"localhost/{name}:v1"


def _no_partials(store: ImageStore) -> None:
    assert [p.name for p in (store.root / "snapshots").iterdir() if p.name.startswith(".")] == []


@pytest.fixture
def ref(store: ImageStore, sample: BuiltImage, tmp_path: Path) -> str:
    require_root()
    return _load(store, sample, tmp_path, "sample")


def test_snapshots_use_overlay_whiteouts(store: ImageStore, ref: str) -> None:
    snaps = unpack(store, ref)
    assert len(snaps) == 3
    gone = os.lstat(snaps[1] / "data" / "gone.txt")
    assert stat.S_ISCHR(gone.st_mode) and gone.st_rdev == 0
    assert os.getxattr(snaps[1] / "opq", OPAQUE_XATTR) == b"y"
    assert not (snaps[1] / "opq" / ".wh..wh..opq").exists()
    assert not any(p.name.startswith(".wh.") for s in snaps for p in s.rglob("*"))
    # the hardlink of layer 3 points at a layer-1 file: copied up into layer 3 and linked
    keep = snaps[2] / "data" / "keep.txt"
    assert os.stat(keep).st_ino == os.stat(snaps[2] / "data" / "keep-link").st_ino
    assert unpack(store, ref) == snaps  # second time: nothing to do
    _no_partials(store)


@pytest.mark.parametrize("mode", ["overlay", "copy"])
def test_rootfs_content(store: ImageStore, ref: str, mode: str) -> None:
    if mode == "overlay":
        require_isolated()
        assert overlay_supported()
    rootfs = create_rootfs(store, ref, f"pk-img-{mode}", mode=mode)
    try:
        assert rootfs.mode == mode
        root = rootfs.path
        assert os.path.ismount(root) == (mode == "overlay")
        assert not (root / "data" / "gone.txt").exists()
        assert (root / "data" / "keep.txt").read_text() == "keep\n"
        assert (root / "data" / "new.txt").read_text() == "third\n"
        assert sorted(os.listdir(root / "opq")) == ["new"]
        assert not (root / "bin" / "vi").exists() and (root / "bin" / "sh").is_symlink()
        hello = os.stat(root / "app" / "hello")
        assert (hello.st_uid, hello.st_gid, stat.S_IMODE(hello.st_mode)) == (1000, 1000, 0o750)
        assert "layer 2" in (root / "app" / "hello").read_text()
        assert os.stat(root / "app" / "hello-link").st_ino == hello.st_ino
        assert os.readlink(root / "app" / "sh") == "/bin/busybox"
        dev = os.lstat(root / "dev" / "podkit-null")
        assert stat.S_ISCHR(dev.st_mode) and os.major(dev.st_rdev) == 1
        assert os.minor(dev.st_rdev) == 3
        assert stat.S_ISFIFO(os.lstat(root / "app" / "fifo").st_mode)
        assert os.getxattr(root / "app" / "attr", "user.podkit") == b"yes"
        home = os.stat(root / "home" / "app")
        assert (home.st_uid, stat.S_IMODE(home.st_mode)) == (1000, 0o700)
        assert (root / "etc" / "motd").stat().st_mode & 0o777 == 0o444
        (root / "written").write_text("container data")  # writable
        assert get_rootfs(store, f"pk-img-{mode}").mode == mode
        assert [r.container_id for r in list_rootfs(store)] == [f"pk-img-{mode}"]
    finally:
        remove_rootfs(store, f"pk-img-{mode}")
    assert not root.exists() and not os.path.ismount(root)
    remove_rootfs(store, f"pk-img-{mode}")  # idempotent


def test_overlay_and_copy_trees_match(store: ImageStore, ref: str) -> None:
    require_isolated()
    a = create_rootfs(store, ref, "pk-img-a", mode="overlay")
    b = create_rootfs(store, ref, "pk-img-b", mode="copy")
    try:
        assert tree(a.path) == tree(b.path)
    finally:
        remove_rootfs(store, "pk-img-a")
        remove_rootfs(store, "pk-img-b")


def test_readonly_overlay_and_unmount(store: ImageStore, ref: str) -> None:
    require_isolated()
    rootfs = create_rootfs(store, ref, "pk-img-ro", mode="overlay", readonly=True)
    try:
        with pytest.raises(OSError):
            (rootfs.path / "x").write_text("no")
        unmount_rootfs(store, "pk-img-ro")
        assert not os.path.ismount(rootfs.path)
        unmount_rootfs(store, "pk-img-ro")
    finally:
        remove_rootfs(store, "pk-img-ro")


def test_duplicate_and_invalid_container_ids(store: ImageStore, ref: str) -> None:
    create_rootfs(store, ref, "pk-img-dup", mode="copy")
    try:
        with pytest.raises(AlreadyExistsError, match=r"'pk-img-dup' already exists"):
            create_rootfs(store, ref, "pk-img-dup", mode="copy")
        with pytest.raises(ValueError, match="container ID"):
            create_rootfs(store, ref, "../evil", mode="copy")
        with pytest.raises(ValueError, match="rootfs mode"):
            create_rootfs(store, ref, "pk-img-x", mode="zfs")
    finally:
        remove_rootfs(store, "pk-img-dup")


def test_snapshots_shared_and_gc(store: ImageStore, sample_layers_raw: list[bytes],
                                 tmp_path: Path) -> None:
    require_root()
    first = build_image(sample_layers_raw[:2], ["gzip", ""], {"Cmd": ["a"]})
    second = build_image([*sample_layers_raw[:2], Layer().file("x", b"x").bytes()],
                         ["gzip", "", ""], {"Cmd": ["b"]})
    r1 = _load(store, first, tmp_path, "first")
    r2 = _load(store, second, tmp_path, "second")
    unpack(store, r1)
    before = set(os.listdir(store.root / "snapshots"))
    unpack(store, r2)
    after = set(os.listdir(store.root / "snapshots"))
    assert len(before) == 2 and len(after - before) == 1  # the base two are shared
    rootfs = create_rootfs(store, r2, "pk-img-gc", mode="copy")
    store.remove(r1)
    store.remove(r2)
    kept = store.gc()
    assert kept.snapshots == ()  # in use by the container rootfs
    remove_rootfs(store, rootfs.container_id)
    assert len(store.gc().snapshots) == 3
    assert os.listdir(store.root / "snapshots") == []


def _hostile(store: ImageStore, tmp_path: Path, layer: bytes, name: str) -> tuple[str, str]:
    img = build_image([layer], [""], {"Cmd": ["x"]})
    return _load(store, img, tmp_path, name), img.manifest["layers"][0]["digest"]


def _info(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


@pytest.mark.parametrize(
    ("case", "entries", "fragment"),
    [
        ("absolute", [_info("/etc/evil")], "'/etc/evil' is an absolute path"),
        ("dotdot", [_info("a/../../evil")], "'a/../../evil' contains '..'"),
        ("symlink", [_info("evil", tarfile.SYMTYPE, "/etc"), _info("evil/passwd")],
         "'evil/passwd' passes through symlink 'evil'"),
        ("hardlink", [_info("evil", tarfile.LNKTYPE, "../../etc/passwd")],
         "hardlink target of 'evil'"),
        ("hardlink-abs", [_info("evil", tarfile.LNKTYPE, "/etc/passwd")], "absolute path"),
        ("hardlink-via-symlink", [_info("d", tarfile.SYMTYPE, "/etc"),
                                  _info("evil", tarfile.LNKTYPE, "d/passwd")],
         "passes through symlink 'd'"),
    ],
)
def test_hostile_layers_refused(store: ImageStore, tmp_path: Path, case: str,
                                entries: list[tarfile.TarInfo], fragment: str) -> None:
    require_root()
    layer = Layer()
    for info in entries:
        layer.raw(info, b"" if info.isreg() else None)
    ref, digest = _hostile(store, tmp_path, layer.bytes(), f"hostile-{case}")
    with pytest.raises(UnsafeLayerError) as err:
        create_rootfs(store, ref, f"pk-img-{case}", mode="copy")
    assert digest in str(err.value) and fragment in str(err.value)
    assert os.listdir(store.root / "snapshots") == []
    assert not (store.root / "containers" / f"pk-img-{case}").exists()
    assert not Path("/etc/evil").exists()


def test_hardlink_through_lower_layer_symlink_refused(store: ImageStore,
                                                      tmp_path: Path) -> None:
    require_root()
    lower = Layer().symlink("evil", "/etc").bytes()
    upper = Layer().hardlink("stolen", "evil/passwd").bytes()
    img = build_image([lower, upper], ["", ""], {"Cmd": ["x"]})
    ref = _load(store, img, tmp_path, "hardlink-lower")
    digest = img.manifest["layers"][1]["digest"]
    with pytest.raises(UnsafeLayerError, match=rf"{digest}.*'evil/passwd' passes through "
                                               r"symlink 'evil' of a lower layer"):
        create_rootfs(store, ref, "pk-img-hl", mode="copy")
    assert not (store.root / "containers" / "pk-img-hl").exists()
    assert not any(p.name.startswith(".") for p in (store.root / "snapshots").iterdir())
    assert not list((store.root / "snapshots").glob("*/fs/stolen"))


def test_missing_parent_dir_keeps_lower_metadata(store: ImageStore, tmp_path: Path) -> None:
    require_root()
    lower = Layer().dir("home", 0o755).dir("home/u", 0o700, 1000, 1000).bytes()
    upper = Layer().file("home/u/f", b"f", 0o600, 1000, 1000).bytes()  # no dir entries
    img = build_image([lower, upper], ["", ""], {"Cmd": ["x"]})
    snaps = unpack(store, _load(store, img, tmp_path, "parents"))
    st = os.stat(snaps[1] / "home" / "u")
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1000, 1000, 0o700)


def test_huge_pax_header_refused(store: ImageStore, tmp_path: Path) -> None:
    require_root()
    info = tarfile.TarInfo("big")
    info.pax_headers = {"comment": "x" * (2 << 20)}
    ref, digest = _hostile(store, tmp_path, Layer().raw(info, b"").bytes(), "hugeheader")
    with pytest.raises(UnsafeLayerError, match=rf"{digest}.*extended tar header"):
        unpack(store, ref)
    assert os.listdir(store.root / "snapshots") == []


def test_diff_id_mismatch_leaves_no_snapshot(store: ImageStore, tmp_path: Path) -> None:
    require_root()
    good = Layer().file("a", b"a").bytes()
    bad = build_image([good], ["gzip"], {"Cmd": ["x"]})
    # rebuild config + manifest around a wrong diff_id
    cfg = dict(bad.config)
    cfg["rootfs"] = {"type": "layers", "diff_ids": [sha(b"other")]}
    raw_cfg = json.dumps(cfg).encode()
    manifest = dict(bad.manifest)
    manifest["config"] = {**manifest["config"], "digest": sha(raw_cfg), "size": len(raw_cfg)}
    raw_man = json.dumps(manifest).encode()
    blobs = {**bad.blobs, sha(raw_cfg): raw_cfg, sha(raw_man): raw_man}
    desc = {"mediaType": manifest["mediaType"], "digest": sha(raw_man), "size": len(raw_man)}
    layout = write_layout(tmp_path / "bad", [(desc, "v1")], blobs)
    import_image(store, layout, "localhost/badiff")
    with pytest.raises(DigestMismatchError, match=r"uncompressed content is sha256:.*diff_id"):
        unpack(store, "localhost/badiff:v1")
    assert os.listdir(store.root / "snapshots") == []


def test_corrupt_stored_layer_detected(store: ImageStore, ref: str) -> None:
    layer = store.get(ref).layers[1]  # the uncompressed one
    path = store.blob_path(layer.digest)
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[600] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(DigestMismatchError, match=layer.digest):
        unpack(store, ref)
    assert len(os.listdir(store.root / "snapshots")) == 1  # only the good base layer
    _no_partials(store)


def test_zstd_layers(store: ImageStore, tmp_path: Path) -> None:
    """With the optional ``zstandard`` package: unpacked; without it: a clear error."""
    require_root()
    raw = Layer().dir("z").file("z/file", b"zstd content\n" * 100).bytes()
    try:
        import zstandard
    except ImportError:
        zstandard = None
    # without the module any bytes do: the error comes before the blob is read
    compressed = zstandard.ZstdCompressor().compress(raw) if zstandard else b"\x28\xb5\x2f\xfd"
    img = build_image([raw], [""], {"Cmd": ["x"]})
    manifest = dict(img.manifest)
    manifest["layers"] = [{"mediaType": "application/vnd.oci.image.layer.v1.tar+zstd",
                           "digest": sha(compressed), "size": len(compressed)}]
    raw_man = json.dumps(manifest).encode()
    blobs = {**img.blobs, sha(compressed): compressed, sha(raw_man): raw_man}
    desc = {"mediaType": manifest["mediaType"], "digest": sha(raw_man), "size": len(raw_man)}
    import_image(store, write_layout(tmp_path / "z", [(desc, "v1")], blobs), "localhost/zstd")
    if zstandard is None:
        with pytest.raises(UnsupportedMediaTypeError, match=r"install the 'zstandard' package"):
            unpack(store, "localhost/zstd:v1")
    else:
        [snap] = unpack(store, "localhost/zstd:v1")
        assert (snap / "z" / "file").read_bytes() == b"zstd content\n" * 100


def test_zstd_missing_module_is_a_clear_error(store: ImageStore, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    require_root()
    raw = Layer().file("f", b"x").bytes()
    img = build_image([raw], [""], {"Cmd": ["x"]})
    manifest = dict(img.manifest)
    manifest["layers"] = [{**manifest["layers"][0],
                           "mediaType": "application/vnd.oci.image.layer.v1.tar+zstd"}]
    raw_man = json.dumps(manifest).encode()
    desc = {"mediaType": manifest["mediaType"], "digest": sha(raw_man), "size": len(raw_man)}
    import_image(store, write_layout(tmp_path / "z", [(desc, "v1")],
                                     {**img.blobs, sha(raw_man): raw_man}), "localhost/nozstd")
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(UnsupportedMediaTypeError, match=r"zstd-compressed: install"):
        unpack(store, "localhost/nozstd:v1")
    assert os.listdir(store.root / "snapshots") == []


def test_unsupported_layer_media_type(store: ImageStore, tmp_path: Path) -> None:
    require_root()
    raw = Layer().file("f", b"x").bytes()
    img = build_image([raw], [""], {"Cmd": ["x"]})
    manifest = dict(img.manifest)
    manifest["layers"] = [{**manifest["layers"][0], "mediaType": "application/x-squashfs"}]
    raw_man = json.dumps(manifest).encode()
    desc = {"mediaType": manifest["mediaType"], "digest": sha(raw_man), "size": len(raw_man)}
    import_image(store, write_layout(tmp_path / "u", [(desc, "v1")],
                                     {**img.blobs, sha(raw_man): raw_man}), "localhost/sq")
    with pytest.raises(UnsupportedMediaTypeError, match=r"application/x-squashfs.*localhost/sq"):
        create_rootfs(store, "localhost/sq:v1", "pk-img-sq", mode="copy")
    assert not (store.root / "containers" / "pk-img-sq").exists()



def test_deep_nesting_refused_without_leftovers(store: ImageStore, tmp_path: Path) -> None:
    """An entry 1500 levels deep (fits PATH_MAX) once made unpack's cleanup hit Python's
    recursion limit: a raw RecursionError and the temp tree left behind."""
    require_root()
    from podkit.image.unpack import MAX_DEPTH

    deep = "d/" * 1500 + "f"
    ref, digest = _hostile(store, tmp_path, Layer().file(deep, b"x").bytes(), "deep")
    with pytest.raises(UnsafeLayerError, match=rf"{digest}.*1501 levels deep, deeper than "
                                               rf"{MAX_DEPTH}"):
        create_rootfs(store, ref, "pk-img-deep", mode="copy")
    assert os.listdir(store.root / "snapshots") == []
    ok, _ = _hostile(store, tmp_path, Layer().file("d/" * (MAX_DEPTH - 1) + "f").bytes(), "ok")
    rootfs = create_rootfs(store, ok, "pk-img-deep-ok", mode="copy")
    assert (rootfs.path / ("d/" * (MAX_DEPTH - 1) + "f")).is_file()
    remove_rootfs(store, "pk-img-deep-ok")


def _shifted(t: dict[str, tuple[object, ...]], by: int) -> dict[str, tuple[object, ...]]:
    """``tree()`` with every owner moved up by ``by`` (the owner fields by entry type)."""
    where = {"l": (2, 3), "d": (2, 3), "f": (2, 3), "s": (3, 4)}
    out = {}
    for path, entry in t.items():
        fields = list(entry)
        for i in where[str(entry[0])]:
            fields[i] = int(fields[i]) + by  # type: ignore[call-overload]
        out[path] = tuple(fields)
    return out


@pytest.mark.parametrize("mode", ["overlay", "copy"])
def test_rootfs_for_a_user_namespace_shows_its_ids(store: ImageStore, ref: str,
                                                   mode: str) -> None:
    """ID-mapped layers (overlay) or a chowned copy: the same tree, owners shifted into the
    namespace's host range; the shared snapshots keep theirs."""
    from podkit import idmap

    require_isolated()
    host = 800000
    plain = create_rootfs(store, ref, "pk-img-plain", mode="copy")
    try:
        expected = _shifted(tree(plain.path), host)
    finally:
        remove_rootfs(store, "pk-img-plain")
    ids = idmap.IDMap.single(host, 65536)
    with idmap.Holder(ids) as holder:
        ns = idmap.UserNamespace(holder.path("user"), ids)
        rootfs = create_rootfs(store, ref, f"pk-img-ns-{mode}", mode=mode, userns=ns)
    try:
        assert rootfs.mode == mode
        got = tree(rootfs.path)
        assert got == expected
        assert (os.stat(rootfs.path).st_uid, os.stat(rootfs.path).st_gid) == (host, host)
        meta = json.loads((store.root / "containers" / f"pk-img-ns-{mode}" / "rootfs.json")
                          .read_text())
        assert meta["idMap"] == {"uidMap": f"0 {host} 65536\n", "gidMap": f"0 {host} 65536\n"}
        # the namespace's root writes and copies up; on disk the upper keeps the host IDs
        new = rootfs.path / "app" / "hello"
        os.chown(new, host + 5, host + 5)
        assert os.stat(new).st_uid == host + 5
        assert os.stat(unpack(store, ref)[1] / "app" / "hello").st_uid == 1000  # untouched
        assert not (store.root / "containers" / f"pk-img-ns-{mode}" / "layers").exists()
    finally:
        remove_rootfs(store, f"pk-img-ns-{mode}")
    assert not rootfs.path.exists()
    assert idmap.mounts_under(store.root) == []


def test_rootfs_for_a_user_namespace_that_is_gone_leaves_nothing(store: ImageStore,
                                                                 ref: str) -> None:
    from podkit import idmap

    require_isolated()
    ns = idmap.UserNamespace("/proc/self/ns/net", idmap.IDMap.single(800000, 65536))
    with pytest.raises(ImageError, match="is not a user namespace"):
        create_rootfs(store, ref, "pk-img-badns", mode="overlay", userns=ns)
    assert not (store.root / "containers" / "pk-img-badns").exists()
    assert idmap.mounts_under(store.root) == []
