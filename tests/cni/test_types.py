"""podkit.cni.types: result parsing, the conversion graph (vs libcni's recorded matrix), errors."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from podkit import cni
from podkit.cni.types import parse_version, version_at_least


def _conversions(shared: Path) -> tuple[Path, dict[str, Any]]:
    base = shared / "fixtures" / "cni" / "recorded" / "conversions"
    return base, json.loads((base / "libcni-conversion-matrix.json").read_text())["conversions"]


def test_conversion_matrix_matches_libcni(shared: Path) -> None:
    base, matrix = _conversions(shared)
    checked = 0
    for name, targets in matrix.items():
        source = cni.parse_result((base / f"input-{name}.json").read_bytes())
        for version, expected in targets.items():
            if "error" in expected:
                with pytest.raises(cni.ResultError) as info:
                    source.to_version(version)
                assert info.value.msg in expected["error"]
            else:
                assert source.to_version(version).to_dict() == expected, (name, version)
            checked += 1
    assert checked == 42


def test_struct_order_of_0x_output(shared: Path) -> None:
    base, matrix = _conversions(shared)
    res = cni.parse_result((base / "input-result-1.1.0-rich.json").read_bytes())
    # 0.x results print in Go struct order; compare serialised text, not just dict equality
    assert json.dumps(res.to_version("0.4.0").to_dict()) == json.dumps(
        matrix["result-1.1.0-rich"]["0.4.0"])
    assert json.dumps(res.to_version("0.2.0").to_dict()) == json.dumps(
        matrix["result-1.1.0-rich"]["0.2.0"])


def test_recorded_plugin_outputs_parse(shared: Path) -> None:
    results = shared / "fixtures" / "cni" / "recorded" / "results"
    bridge = cni.parse_result((results / "bridge-add-1.0.0.stdout.json").read_bytes(), "1.0.0")
    assert isinstance(bridge, cni.Result) and bridge.cni_version == "1.0.0"
    assert bridge.ips[0].interface == 2 and bridge.interfaces[2].name == "eth0"
    assert "dns" not in bridge.to_dict()  # 1.x drops the empty dns the plugin printed
    old = cni.parse_result((results / "bridge-add-0.2.0.stdout.json").read_bytes(), "0.2.0")
    assert isinstance(old, cni.LegacyResult) and old.ip4 is not None
    assert old.to_dict()["dns"] == {}
    v031 = cni.parse_result((results / "bridge-add-0.3.1.stdout.json").read_bytes())
    assert v031.ips[0].version == "4" and v031.to_dict()["ips"][0]["version"] == "4"
    nover = cni.parse_result((results / "bridge-add-no-cniVersion.stdout.json").read_bytes())
    assert nover.cni_version == "0.1.0"
    lo = cni.parse_result((results / "loopback-add-1.0.0.stdout.json").read_bytes())
    assert [ip.interface for ip in lo.ips] == [0, 0]  # interface 0 is kept
    with pytest.raises(cni.ResultError, match="no valid IP addresses"):
        cni.parse_result({"cniVersion": "1.0.0", "interfaces": [{"name": "lo"}]}).to_version(
            "0.2.0")


def test_parse_result_versions() -> None:
    assert cni.parse_result(b'{"ips":[]}', "1.0.0").cni_version == "1.0.0"
    assert cni.parse_result(b"null", "1.0.0").to_dict() == {"cniVersion": "1.0.0"}
    assert cni.parse_result({"cniVersion": ""}, "0.4.0").cni_version == "0.4.0"
    with pytest.raises(cni.ResultError, match=re.escape('unsupported CNI result version "9.9.9"')):
        cni.parse_result(b'{"cniVersion":"9.9.9"}')
    with pytest.raises(cni.ResultError, match="failed to unmarshal raw result: unexpected end"):
        cni.parse_result(b"", "1.0.0")
    with pytest.raises(cni.ResultError, match="expected a list of objects"):
        cni.parse_result({"cniVersion": "1.0.0", "ips": {"address": "x"}})
    with pytest.raises(cni.ResultError, match=r"no converter for CNI result version 1\.0\.0 to 2"):
        cni.parse_result({"cniVersion": "1.0.0"}).to_version("2.0")
    r = cni.parse_result({"cniVersion": "1.0.0", "ips": [{"address": "10.0.0.2/24"}]})
    assert r.to_version("").cni_version == "0.1.0"


def test_result_json_is_compact_and_sorted() -> None:
    r = cni.parse_result({"cniVersion": "1.0.0", "ips": [{"gateway": "10.0.0.1",
                                                           "address": "10.0.0.2/24"}]})
    assert r.to_json() == (b'{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.2/24",'
                           b'"gateway":"10.0.0.1"}]}')


def test_1_1_fields_and_route_extras() -> None:
    doc = {"cniVersion": "1.1.0",
           "interfaces": [{"name": "eth0", "mtu": 1400, "socketPath": "/s", "pciID": "p"}],
           "routes": [{"dst": "0.0.0.0/0", "table": 0, "scope": 0, "mtu": 0}]}
    r = cni.parse_result(doc)
    assert r.to_dict() == {"cniVersion": "1.1.0",
                           "interfaces": [{"name": "eth0", "mtu": 1400, "socketPath": "/s",
                                           "pciID": "p"}],
                           "routes": [{"dst": "0.0.0.0/0", "table": 0, "scope": 0}]}
    assert r.to_version("0.4.0").to_dict()["interfaces"] == [{"name": "eth0"}]


def test_versions() -> None:
    assert parse_version("") == (0, 1, 0)
    assert parse_version("1") == (1, 0, 0)
    assert parse_version("0.4") == (0, 4, 0)
    for bad in ("1.2.3.4", "x.y", "1.0.f", "1..0"):
        with pytest.raises(ValueError, match="invalid version"):
            parse_version(bad)
    assert version_at_least("1.0.0", "0.4.0") and not version_at_least("0.3.1", "0.4.0")
    assert not version_at_least("garbage", "0.1.0")


def test_cni_error_shape_and_codes() -> None:
    e = cni.CNIError(7, "Invalid Configuration", "Network too small", "fakeA", command="ADD",
                     network="hk", container_id="c1", ifname="eth0")
    assert e.plugin_error == "Invalid Configuration; Network too small"
    assert str(e) == ('network "hk", container "c1", ifname "eth0": plugin type="fakeA" '
                      "failed (add): Invalid Configuration; Network too small")
    assert e.to_dict() == {"code": 7, "msg": "Invalid Configuration",
                           "details": "Network too small"}
    assert isinstance(e, cni.CNIError) and (e.code, e.msg, e.details, e.plugin) == (
        7, "Invalid Configuration", "Network too small", "fakeA")
    e2 = e.with_context(command="DEL", rollback_errors=(cni.CNIError(1, "x"),))
    assert e.command == "ADD" and e2.command == "DEL"
    assert "rollback also failed: x" in str(e2)
    assert (cni.ERR_INCOMPATIBLE_VERSION, cni.ERR_UNSUPPORTED_FIELD, cni.ERR_UNKNOWN_CONTAINER,
            cni.ERR_INVALID_ENVIRONMENT_VARIABLES, cni.ERR_IO_FAILURE, cni.ERR_DECODING_FAILURE,
            cni.ERR_INVALID_NETWORK_CONFIG, cni.ERR_INVALID_NETNS, cni.ERR_TRY_AGAIN_LATER,
            cni.ERR_PLUGIN_NOT_AVAILABLE, cni.ERR_LIMITED_CONNECTIVITY, cni.ERR_INTERNAL) == (
        1, 2, 3, 4, 5, 6, 7, 8, 11, 50, 51, 999)
