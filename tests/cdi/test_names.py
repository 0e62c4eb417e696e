"""Qualified device names: the Go parser package's cases and error wording."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podkit import cdi
from podkit.cdi import names

from . import strategies


@pytest.mark.parametrize(
    "name",
    [
        "vendor.com/class=dev",
        "a/b=c",
        "vendor.com/class=0",
        "vendor1.com/class.subclass=dev1",
        "other-vendor1.com/class_1=dev_1",
        "yet_another-vendor2.com/c-lass_2=dev_1:2.3",
        "V/C=D",
    ],
)
def test_valid_qualified_names(name: str) -> None:
    assert cdi.is_qualified_name(name)
    vendor, class_, dev = cdi.parse_qualified_name(name)
    assert cdi.qualified_name(vendor, class_, dev) == name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("_invalid.com/class=dev", 'invalid device "_invalid.com/class=dev": invalid vendor. '
         '"_invalid.com", should start with letter'),
        ("invalid2.com-/class=dev", 'invalid vendor. "invalid2.com-", should end with a letter'),
        ("invalid3.com/_class=dev", 'invalid class. "_class", should start with letter'),
        ("invalid4.com/class_=dev", 'invalid class. "class_", should end with a letter or digit'),
        ("invalid5.com/class=-dev", 'invalid name "-dev", should start with a letter or digit'),
        ("invalid6.com/class=dev:", 'invalid name "dev:", should end with a letter or digit'),
        ("*.com/*dev=*gpu*", "should start with letter"),
        ("/dev/null", 'unqualified device "/dev/null", missing vendor'),
        ("vendor3.com=device3", 'unqualified device "vendor3.com=device3", missing vendor'),
        ("vendor2.com/device2", 'unqualified device "vendor2.com/device2", missing vendor'),
        ("", 'unqualified device "", missing vendor'),
        ("a/=c", "missing vendor"),
        ("a/b=", "missing vendor"),
        ("v.com/x/y=z", "invalid class. invalid character '/' in name \"x/y\""),
        ("v.com/c=d e", "invalid character ' ' in device name \"d e\""),
        ("v.com/c=dé1", "invalid character 'é' in device name"),
        ("vendor.com/1class=dev", 'invalid class. "1class", should start with letter'),
    ],
)
def test_invalid_qualified_names(name: str, message: str) -> None:
    assert not cdi.is_qualified_name(name)
    with pytest.raises(cdi.InvalidNameError, match=None) as exc:
        cdi.parse_qualified_name(name)
    assert message in str(exc.value)
    assert isinstance(exc.value, ValueError)


def test_parse_device_splits_without_validation() -> None:
    assert cdi.parse_device("_x.com/y=-z") == ("_x.com", "y", "-z")
    assert cdi.parse_device("a.com/b/c=d=e") == ("a.com", "b/c", "d=e")
    for bad in ("", "/a/b=c", "a.com/b", "a.com=b", "=b", "a/=b"):
        assert cdi.parse_device(bad) == ("", "", bad)


def test_parse_qualifier() -> None:
    assert cdi.parse_qualifier("vendor.com/class") == ("vendor.com", "class")
    assert cdi.parse_qualifier("a.com/x/y") == ("a.com", "x/y")
    assert cdi.parse_qualifier("novendor") == ("", "novendor")
    assert cdi.parse_qualifier("/c") == ("", "/c")


def test_single_character_vendor_and_class_are_valid() -> None:
    names.validate_vendor_name("a")
    names.validate_class_name("b")
    names.validate_device_name("c")


@pytest.mark.parametrize("vendor", ["", "1abc", "a_", "a*b", "-a"])
def test_bad_vendor(vendor: str) -> None:
    with pytest.raises(cdi.InvalidNameError, match=r"^invalid vendor\. "):
        cdi.validate_vendor_name(vendor)


def test_empty_names() -> None:
    with pytest.raises(cdi.InvalidNameError, match=r"^invalid vendor\. empty name$"):
        cdi.validate_vendor_name("")
    with pytest.raises(cdi.InvalidNameError, match=r"^invalid class\. empty name$"):
        cdi.validate_class_name("")
    with pytest.raises(cdi.InvalidNameError, match=r"^invalid \(empty\) device name$"):
        cdi.validate_device_name("")


def test_device_name_may_start_with_digit_and_contain_colon() -> None:
    cdi.validate_device_name("0")
    cdi.validate_device_name("0:1.2_3-4")
    with pytest.raises(cdi.InvalidNameError):
        cdi.validate_device_name("a=b")


@given(vendor=strategies.vendor_names, class_=strategies.vendor_names,
       name=strategies.device_names)
def test_qualified_name_round_trip(vendor: str, class_: str, name: str) -> None:
    q = cdi.qualified_name(vendor, class_, name)
    assert cdi.is_qualified_name(q)
    assert cdi.parse_qualified_name(q) == (vendor, class_, name)
    assert cdi.parse_device(q) == (vendor, class_, name)


@given(text=st.text(max_size=30))
def test_parse_never_crashes_and_agrees_with_is_qualified(text: str) -> None:
    try:
        parts = cdi.parse_qualified_name(text)
    except cdi.InvalidNameError as e:
        assert text in str(e)
        assert not cdi.is_qualified_name(text)
    else:
        assert cdi.qualified_name(*parts) == text
