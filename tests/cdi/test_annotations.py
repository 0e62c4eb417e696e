"""CDI annotations (reference/cdi.md e) and the CRI + annotation device merge."""

from __future__ import annotations

import re

import pytest

from podkit import cdi


@pytest.mark.parametrize(
    ("plugin", "device_id", "key"),
    [
        ("vendor.class", "device", "cdi.k8s.io/vendor.class_device"),
        ("v-e.n_d.or.cl-as_s", "d-e/v/i/c-e", "cdi.k8s.io/v-e.n_d.or.cl-as_s_d-e_v_i_c-e"),
        ("a", "b", "cdi.k8s.io/a_b"),
    ],
)
def test_annotation_key(plugin: str, device_id: str, key: str) -> None:
    assert cdi.annotation_key(plugin, device_id) == key


@pytest.mark.parametrize(
    ("plugin", "device_id", "message"),
    [
        ("", "d", "invalid plugin name, empty"),
        ("p", "", "invalid deviceID, empty"),
        ("p" * 40, "d" * 30, "too long"),
        ("-p", "d", "first '-' should be alphanumeric"),
        ("p", "d-", "last '-' should be alphanumeric"),
        ("p", "d*x", "invalid character '*'"),
        ("p q", "d", "invalid character ' '"),
    ],
)
def test_annotation_key_errors(plugin: str, device_id: str, message: str) -> None:
    with pytest.raises(cdi.AnnotationError, match=None) as exc:
        cdi.annotation_key(plugin, device_id)
    assert message in str(exc.value)


def test_annotation_key_length_limit() -> None:
    assert cdi.annotation_key("p" * 31, "d" * 31)  # 63 characters
    with pytest.raises(cdi.AnnotationError, match="too long"):
        cdi.annotation_key("p" * 32, "d" * 31)


def test_annotation_value() -> None:
    assert cdi.annotation_value([]) == ""
    assert cdi.annotation_value(["a.com/b=c", "a.com/b=d"]) == "a.com/b=c,a.com/b=d"
    with pytest.raises(cdi.AnnotationError, match="unqualified device"):
        cdi.annotation_value(["a.com/b=c", "/dev/null"])


def test_update_annotations() -> None:
    orig = {"other": "x"}
    out = cdi.update_annotations(orig, "vendor.gpu", "claim/1", ["vendor.com/gpu=0"])
    assert out == {"other": "x", "cdi.k8s.io/vendor.gpu_claim_1": "vendor.com/gpu=0"}
    assert orig == {"other": "x"}
    assert cdi.update_annotations(None, "p", "d", []) == {"cdi.k8s.io/p_d": ""}
    with pytest.raises(cdi.AnnotationError, match=re.escape(
            'CDI annotation failed, key "cdi.k8s.io/vendor.gpu_claim_1" used')):
        cdi.update_annotations(out, "vendor.gpu", "claim/1", ["vendor.com/gpu=1"])
    with pytest.raises(cdi.AnnotationError, match="CDI annotation failed: invalid plugin name"):
        cdi.update_annotations(out, "", "d", [])
    with pytest.raises(cdi.AnnotationError, match="CDI annotation failed: unqualified device"):
        cdi.update_annotations(out, "p", "d", ["bad"])


def test_parse_annotations() -> None:
    ann = {
        "unrelated": "not/a=device?",
        "cdi.k8s.io/p_1": "a.com/b=c,a.com/b=d",
        "cdi.k8s.io/anything goes": "x.com/y=z,a.com/b=c",
    }
    keys, devices = cdi.parse_annotations(ann)
    assert keys == ["cdi.k8s.io/p_1", "cdi.k8s.io/anything goes"]
    assert devices == ["a.com/b=c", "a.com/b=d", "x.com/y=z", "a.com/b=c"]
    assert cdi.parse_annotations(None) == ([], [])
    for bad in ("a.com/b=c,", "/dev/null", "a.com/b=c, x.com/y=z", ""):
        with pytest.raises(cdi.AnnotationError, match="invalid CDI device name"):
            cdi.parse_annotations({"cdi.k8s.io/p_1": bad})


def test_round_trip() -> None:
    ann = cdi.update_annotations({}, "vendor.gpu", "0", ["vendor.com/gpu=0", "vendor.com/gpu=1"])
    assert cdi.parse_annotations(ann) == (["cdi.k8s.io/vendor.gpu_0"],
                                          ["vendor.com/gpu=0", "vendor.com/gpu=1"])


def test_devices_from_request_order_and_dedup() -> None:
    ann = {"cdi.k8s.io/p_1": "a.com/b=2,a.com/b=1", "cdi.k8s.io/p_2": "a.com/b=3"}
    got = cdi.devices_from_request(["a.com/b=1", "x.com/y=0", "a.com/b=1"], ann)
    assert got == ["a.com/b=1", "x.com/y=0", "a.com/b=2", "a.com/b=3"]
    assert cdi.devices_from_request([], None) == []
    with pytest.raises(cdi.AnnotationError):
        cdi.devices_from_request([], {"cdi.k8s.io/p": "bad"})
