"""Hostile layer tars: each is refused with a typed error, or unpacked the documented safe way,
and nothing is written outside the store (a sentinel dir the entries aim at stays unchanged).

Every probe runs in both rootfs modes (overlay mount and copy). Needs root: device nodes,
ownership, ``trusted.*`` xattrs and overlay mounts (run via ``scripts/isolated``).
"""

from __future__ import annotations

import json
import os
import stat
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from image.imagebuild import build_image, sha, tree, write_layout
from podkit import image
from podkit.image import ImageError, ImageStore, UnsafeLayerError
from support import require_isolated

pytestmark = pytest.mark.integration

SENTINEL = "@SENTINEL@"
"""Stands for the sentinel dir's absolute path in entry names and link targets."""

Check = Callable[[Path], None]


@dataclass(frozen=True)
class LayerProbe:
    """Layers (tar entries, base first): ``error`` is the typed error expected (with
    ``fragment`` in its message), or ``None`` when the documented behaviour is to unpack
    safely, checked by ``check`` on the rootfs."""

    layers: list[list[tarfile.TarInfo | tuple[tarfile.TarInfo, bytes]]]
    error: type[ImageError] | None = UnsafeLayerError
    fragment: str = ""
    check: Check | None = None
    compression: str = ""
    mangle: Callable[[bytes], bytes] | None = None


def _e(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", data: bytes = b"",
       mode: int = 0o644, size: int | None = None, pax: dict[str, str] | None = None,
       dev: tuple[int, int] = (0, 0)) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.mode = mode
    info.mtime = 1_700_000_000
    info.devmajor, info.devminor = dev
    if pax:
        info.pax_headers = dict(pax)
    info.size = len(data) if size is None else size
    return info, data


def _reg(name: str, data: bytes = b"x", **kw: object) -> tuple[tarfile.TarInfo, bytes]:
    return _e(name, tarfile.REGTYPE, data=data, **kw)  # type: ignore[arg-type]


def _sym(name: str, target: str) -> tuple[tarfile.TarInfo, bytes]:
    return _e(name, tarfile.SYMTYPE, link=target, mode=0o777)


def _hard(name: str, target: str) -> tuple[tarfile.TarInfo, bytes]:
    return _e(name, tarfile.LNKTYPE, link=target)


def _dir(name: str, mode: int = 0o755) -> tuple[tarfile.TarInfo, bytes]:
    return _e(name, tarfile.DIRTYPE, mode=mode)


def _has(rel: str, kind: Callable[[int], bool] = stat.S_ISREG) -> Check:
    def check(rootfs: Path) -> None:
        assert kind(os.lstat(rootfs / rel).st_mode), rel
    return check


def _mode(rel: str, mode: int) -> Check:
    def check(rootfs: Path) -> None:
        assert stat.S_IMODE(os.lstat(rootfs / rel).st_mode) == mode, oct(os.lstat(rootfs / rel)
                                                                          .st_mode)
    return check


def _device(rel: str, kind: Callable[[int], bool], major: int, minor: int) -> Check:
    def check(rootfs: Path) -> None:
        st = os.lstat(rootfs / rel)
        assert kind(st.st_mode) and os.major(st.st_rdev) == major \
            and os.minor(st.st_rdev) == minor
    return check


def _no_xattr(rel: str, prefix: str) -> Check:
    def check(rootfs: Path) -> None:
        names = os.listxattr(rootfs / rel, follow_symlinks=False)
        assert not [n for n in names if n.startswith(prefix)], names
    return check


def _absent(rel: str) -> Check:
    def check(rootfs: Path) -> None:
        assert not os.path.lexists(rootfs / rel), rel
    return check


def _all(*checks: Check) -> Check:
    def check(rootfs: Path) -> None:
        for one in checks:
            one(rootfs)
    return check


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


_UP = "../" * 12  # far enough up from any snapshot dir to reach /
_HUGE = 1 << 40

PROBES: dict[str, LayerProbe] = {
    # paths that leave the layer root
    "absolute-path": LayerProbe([[_reg(f"{SENTINEL}/evil")]], fragment="absolute path"),
    "dotdot-leading": LayerProbe([[_reg(f"{_UP}{SENTINEL}/evil")]], fragment="'..'"),
    "dotdot-middle": LayerProbe([[_reg("a/../../evil")]], fragment="'..'"),
    "dotdot-dir-entry": LayerProbe([[_dir("..")]], fragment="'..'"),
    "nul-in-name-pax": LayerProbe([[_reg("evil", pax={"path": "ok\0/../../evil"})]],
                                  fragment="contains NUL"),
    # symlink write-through, in one layer and across layers
    "symlink-write-through": LayerProbe([[_sym("link", SENTINEL), _reg("link/evil")]],
                                        fragment="passes through symlink 'link'"),
    "symlink-relative-write-through": LayerProbe([[_sym("link", _UP + SENTINEL),
                                                   _reg("link/evil")]],
                                                 fragment="passes through symlink"),
    "symlink-dir-through": LayerProbe([[_sym("link", SENTINEL), _dir("link/sub")]],
                                      fragment="passes through symlink"),
    "symlink-deep-write-through": LayerProbe([[_dir("a"), _sym("a/link", "/"),
                                               _reg(f"a/link/{SENTINEL}/evil")]],
                                             fragment="passes through symlink 'a/link'"),
    "symlink-in-lower-layer": LayerProbe([[_sym("link", SENTINEL)], [_reg("link/evil")]],
                                         error=None, check=_has("link/evil")),
    "symlink-replaced-by-file": LayerProbe([[_sym("link", f"{SENTINEL}/keep"),
                                             _reg("link", b"mine")]],
                                           error=None, check=_has("link")),
    "symlink-replaced-by-dir": LayerProbe([[_sym("link", SENTINEL), _dir("link"),
                                            _reg("link/evil")]],
                                          error=None, check=_has("link/evil")),
    "symlink-absolute-target-kept": LayerProbe([[_sym("link", f"{SENTINEL}/keep")]],
                                               error=None,
                                               check=_has("link", stat.S_ISLNK)),
    # hardlink escapes
    "hardlink-absolute": LayerProbe([[_hard("h", f"{SENTINEL}/keep")]],
                                    fragment="absolute path"),
    "hardlink-dotdot": LayerProbe([[_hard("h", f"{_UP}{SENTINEL}/keep")]], fragment="'..'"),
    "hardlink-via-symlink": LayerProbe([[_sym("d", SENTINEL), _hard("h", "d/keep")]],
                                       fragment="passes through symlink 'd'"),
    "hardlink-via-lower-symlink": LayerProbe([[_sym("d", SENTINEL)], [_hard("h", "d/keep")]],
                                             fragment="of a lower layer"),
    "hardlink-to-symlink": LayerProbe([[_sym("s", f"{SENTINEL}/keep"), _hard("h", "s")]],
                                      error=None, check=_has("h", stat.S_ISLNK)),
    "hardlink-to-missing": LayerProbe([[_hard("h", "nothing")]], fragment="missing"),
    "hardlink-to-root": LayerProbe([[_hard("h", ".")]], fragment="to the root"),
    "hardlink-to-dir": LayerProbe([[_dir("d"), _hard("h", "d")]], fragment="to directory"),
    "hardlink-to-lower-file": LayerProbe([[_reg("f", b"lower")], [_hard("h", "f")]],
                                         error=None, check=_has("h")),
    # whiteouts
    "whiteout-dotdot": LayerProbe([[_reg(".wh...")]], fragment="bad whiteout"),
    "whiteout-dot": LayerProbe([[_reg(".wh..")]], fragment="bad whiteout"),
    "whiteout-empty": LayerProbe([[_reg(".wh.")]], fragment="bad whiteout"),
    "whiteout-dotdot-nested": LayerProbe([[_dir("a"), _reg("a/.wh...")]],
                                         fragment="bad whiteout"),
    "whiteout-through-symlink": LayerProbe([[_sym("link", SENTINEL), _reg("link/.wh.keep")]],
                                           fragment="passes through symlink"),
    "whiteout-through-lower-symlink": LayerProbe([[_sym("link", SENTINEL)],
                                                  [_reg("link/.wh.keep")]], error=None,
                                                 check=_has("link", stat.S_ISDIR)),
    "opaque-through-lower-symlink": LayerProbe([[_sym("link", SENTINEL)],
                                                [_reg("link/.wh..wh..opq")]], error=None,
                                               check=_has("link", stat.S_ISDIR)),
    "hardlink-then-write-through": LayerProbe([[_sym("s", f"{SENTINEL}/keep"), _hard("h", "s"),
                                                _reg("h", b"overwrite")]], error=None,
                                              check=_has("h")),
    "whiteout-of-lower-file": LayerProbe([[_reg("f")], [_reg(".wh.f")]], error=None,
                                         check=_absent("f")),
    "opaque-through-symlink": LayerProbe([[_sym("link", SENTINEL),
                                           _reg("link/.wh..wh..opq")]],
                                         fragment="passes through symlink"),
    "opaque-under-file": LayerProbe([[_reg("f"), _reg("f/.wh..wh..opq")]],
                                    fragment="non-directory"),
    "opaque-at-root": LayerProbe([[_reg("a")], [_reg(".wh..wh..opq"), _reg("b")]],
                                 error=None, check=_has("b")),
    "opaque-in-new-dir": LayerProbe([[_reg("new/deep/.wh..wh..opq")]], error=None,
                                    check=_has("new/deep", stat.S_ISDIR)),
    "whiteout-meta-ignored": LayerProbe([[_reg(".wh..wh.plnk"), _reg("x")]], error=None,
                                        check=_all(_has("x"), _absent(".wh..wh.plnk"))),
    "forged-overlay-xattrs": LayerProbe(
        [[_dir("d"), _reg("d/f", pax={"SCHILY.xattr.trusted.overlay.opaque": "y",
                                      "SCHILY.xattr.trusted.overlay.redirect": "/"})]],
        error=None, check=_no_xattr("d/f", "trusted.overlay.")),
    # broken streams and sizes
    "truncated-gzip": LayerProbe([[_reg("big", os.urandom(64 << 10))]], error=ImageError,
                                 fragment="cannot unpack", compression="gzip",
                                 mangle=_truncate),
    "not-gzip": LayerProbe([[_reg("a")]], error=ImageError, fragment="cannot unpack",
                           compression="gzip",
                           mangle=lambda data: b"\x1f\x8b\x08\x00" + b"garbage" * 64),
    "truncated-tar": LayerProbe([[_reg("big", os.urandom(64 << 10))]], error=ImageError,
                                fragment="cannot unpack", mangle=_truncate),
    "huge-claimed-size": LayerProbe([[_reg("big", b"short", size=_HUGE)]],
                                    error=ImageError, fragment="cannot unpack"),
    "huge-pax-size": LayerProbe([[_reg("big", b"short", pax={"size": str(_HUGE)})]],
                                error=ImageError, fragment="cannot unpack"),
    "huge-size-then-entries": LayerProbe([[_reg("big", b"short", size=_HUGE),
                                           _reg(f"{SENTINEL}/evil")]],
                                         error=ImageError, fragment="cannot unpack"),
    "huge-pax-header": LayerProbe([[_reg("big", pax={"comment": "x" * (2 << 20)})]],
                                  fragment="extended tar header"),
    "huge-gnu-longname": LayerProbe([[_e("x" * (2 << 20), tarfile.REGTYPE)]],
                                    fragment="extended tar header"),
    "deep-nesting": LayerProbe([[_reg("d/" * 3000 + "f")]], fragment="deeper than"),
    "deep-nesting-fits-path-max": LayerProbe([[_reg("d/" * 1500 + "f")]],
                                             fragment="deeper than"),
    "deep-nesting-by-dir-entries": LayerProbe([[_dir("d/" * n) for n in range(1, 300)]],
                                              fragment="deeper than"),
    "nesting-at-the-limit": LayerProbe([[_reg("d/" * 255 + "f")]], error=None,
                                       check=_has("d/" * 255 + "f")),
    # special files: created inside the rootfs only
    "char-device": LayerProbe([[_e("dev/mem", tarfile.CHRTYPE, mode=0o666, dev=(1, 1))]],
                              error=None, check=_device("dev/mem", stat.S_ISCHR, 1, 1)),
    "block-device": LayerProbe([[_e("dev/sda", tarfile.BLKTYPE, mode=0o660, dev=(8, 0))]],
                               error=None, check=_device("dev/sda", stat.S_ISBLK, 8, 0)),
    "fifo": LayerProbe([[_e("p", tarfile.FIFOTYPE)]], error=None,
                       check=_has("p", stat.S_ISFIFO)),
    "setuid-root-file": LayerProbe([[_reg("bin/su", b"#!", mode=0o4755)]], error=None,
                                   check=_mode("bin/su", 0o4755)),
    "setgid-dir": LayerProbe([[_dir("g", mode=0o2775), _reg("g/f")]], error=None,
                             check=_mode("g", 0o2775)),
    "unknown-entry-type": LayerProbe([[_e("odd", b"Z")]], fragment="unsupported type"),
    "duplicate-entries": LayerProbe([[_reg("f", b"1"), _reg("f", b"2")]], error=None,
                                    check=_has("f")),
}


def _layer_bytes(entries: list[tarfile.TarInfo | tuple[tarfile.TarInfo, bytes]],
                 sentinel: Path) -> bytes:
    """The tar of ``entries``, written header by header: a header may claim more data than
    follows (tarfile's writer would refuse)."""
    out = bytearray()
    for entry in entries:
        info, data = entry if isinstance(entry, tuple) else (entry, b"")
        info = _place(info, sentinel)
        out += info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
        if info.type == tarfile.REGTYPE:
            out += data + bytes(-len(data) % tarfile.BLOCKSIZE)
    return bytes(out + bytes(2 * tarfile.BLOCKSIZE))


def _place(info: tarfile.TarInfo, sentinel: Path) -> tarfile.TarInfo:
    """``info`` with the sentinel placeholder replaced by its real (absolute) path."""
    real = str(sentinel).lstrip("/")
    out = info.replace(name=info.name.replace(SENTINEL, "/" + real if info.name.startswith(
        SENTINEL) else real), linkname=info.linkname.replace(SENTINEL, str(sentinel)))
    pax = {k: v.replace(SENTINEL, str(sentinel)) for k, v in info.pax_headers.items()}
    out.pax_headers = pax
    return out


def _image(probe: LayerProbe, sentinel: Path, tmp_path: Path) -> tuple[ImageStore, str, str]:
    raws = [_layer_bytes(entries, sentinel) for entries in probe.layers]
    img = build_image(raws, [probe.compression] * len(raws), {"Cmd": ["x"]})
    if probe.mangle is not None:  # rebuild around the broken last layer blob
        last = img.manifest["layers"][-1]
        good = img.blobs.pop(last["digest"])
        broken = probe.mangle(good)
        img.blobs[sha(broken)] = broken
        img.manifest["layers"][-1] = {**last, "digest": sha(broken), "size": len(broken)}
        raw_man = json.dumps(img.manifest).encode()
        img.blobs[sha(raw_man)] = raw_man
        img.descriptor = {**img.descriptor, "digest": sha(raw_man), "size": len(raw_man)}
    store = ImageStore(tmp_path / "store")
    layout = write_layout(tmp_path / "layout", [(img.descriptor, "v1")], img.blobs)
    image.import_image(store, layout, "localhost/hostile/layer")
    return store, "localhost/hostile/layer:v1", img.manifest["layers"][-1]["digest"]


def _sentinel(tmp_path: Path) -> Path:
    sentinel = tmp_path / "sentinel"
    (sentinel / "sub").mkdir(parents=True)
    (sentinel / "keep").write_text("keep")
    return sentinel


def _outside(tmp_path: Path, store: ImageStore) -> dict[str, tuple[object, ...]]:
    """Every path under ``tmp_path`` outside the store's snapshots, containers and locks."""
    inside = (store.root / "snapshots", store.root / "containers", store.root / "locks")
    return {k: v for k, v in tree(tmp_path).items()
            if not any((tmp_path / k).is_relative_to(p) for p in inside)}


@pytest.mark.parametrize("mode", ["overlay", "copy"])
@pytest.mark.parametrize("probe", list(PROBES))
def test_layer_probe(probe: str, mode: str, tmp_path: Path) -> None:
    require_isolated()
    p = PROBES[probe]
    sentinel = _sentinel(tmp_path)
    store, ref, digest = _image(p, sentinel, tmp_path)
    before = _outside(tmp_path, store)
    cid = f"pk-hostile-{mode}"
    try:
        if p.error is None:
            rootfs = image.create_rootfs(store, ref, cid, mode=mode)
            if p.check is not None:
                p.check(rootfs.path)
        else:
            with pytest.raises(p.error) as err:
                image.create_rootfs(store, ref, cid, mode=mode)
            assert digest in str(err.value) and p.fragment in str(err.value), err.value
            assert not (store.root / "containers" / cid).exists()
            snaps = [s.name for s in (store.root / "snapshots").iterdir()]
            assert len(snaps) == len(p.layers) - 1, snaps  # only the good lower layers
    finally:
        if image.list_rootfs(store):
            image.remove_rootfs(store, cid)
    assert _outside(tmp_path, store) == before
    assert tree(sentinel) == {"sub": tree(tmp_path)["sentinel/sub"],
                              "keep": tree(tmp_path)["sentinel/keep"]}
    assert (sentinel / "keep").read_text() == "keep"
