"""podkit.cni.config: every example fixture, every bad fixture, directory loading."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from podkit import cni
from podkit.cni.config import ConfigError, NetworkConfigList, conf_files


@pytest.fixture
def ex(shared: Path) -> Path:
    return shared / "fixtures" / "cni" / "examples"


GOOD = {
    "bridge-hostlocal-portmap.conflist": ("pk-bridge", "1.0.0", ["bridge", "portmap"]),
    "bridge-hostlocal-portmap-disablecheck.conflist": ("pk-bridge-nocheck", "1.0.0",
                                                       ["bridge", "portmap"]),
    "ptp.conflist": ("pk-ptp", "1.0.0", ["ptp"]),
    "with-tuning-bandwidth-firewall.conflist": (
        "pk-full", "1.0.0", ["bridge", "portmap", "firewall", "tuning", "bandwidth"]),
    "dualstack-bridge.conflist": ("pk-dualstack", "1.0.0", ["bridge", "portmap"]),
    "bridge-static-ipam.conflist": ("pk-static", "1.0.0", ["bridge"]),
    "hostlocal-ips-capability.conflist": ("pk-ipcap", "1.0.0", ["bridge"]),
    "macvlan-static.conflist": ("pk-macvlan", "1.0.0", ["macvlan"]),
    "loopback.conflist": ("pk-loopback", "1.0.0", ["loopback"]),
    "legacy-0.3.1.conflist": ("pk-legacy", "0.3.1", ["bridge", "portmap", "tuning"]),
    "legacy-0.4.0.conflist": ("pk-legacy040", "0.4.0", ["bridge", "firewall", "tuning"]),
    "cniversions-select-1.0.0.conflist": ("pk-versions", "1.0.0", ["bridge"]),
    "cniversions-select-1.1.0.conflist": ("pk-versions11", "1.1.0", ["bridge"]),
    "string-booleans.conflist": ("pk-strbool", "1.0.0", ["loopback"]),
    "subdir-plugins/10-pk-subdir.conflist": ("pk-subdir", "1.0.0",
                                             ["bridge", "portmap", "tuning"]),
    "subdir-only/10-pk-noinline.conflist": ("pk-noinline", "1.0.0", ["loopback"]),
    "inlined-only/10-pk-inlined.conflist": ("pk-inlined", "1.0.0", ["loopback"]),
    # bad at runtime, but they parse (SOURCE.md)
    "bad/bad-network-name-chars.conflist": ("pk bad/name", "1.0.0", ["loopback"]),
    "bad/bad-plugin-type-with-path.conflist": ("pk-pathtype", "1.0.0", ["../../usr/bin/true"]),
    "bad/bad-plugin-not-found.conflist": ("pk-missingbin", "1.0.0",
                                          ["loopback", "podkit-no-such-plugin"]),
    "bad/bad-firewall-0.3.1.conflist": ("pk-fw031", "0.3.1", ["bridge", "firewall"]),
    "bad/bad-chained-plugin-first.conflist": ("pk-chainfirst", "1.0.0", ["portmap"]),
    "bad/bad-unsupported-version-1.1.0.conflist": ("pk-v110", "1.1.0", ["loopback"]),
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_good_conflists_parse(ex: Path, name: str) -> None:
    conf = cni.load_conflist(ex / name)
    net, version, types = GOOD[name]
    assert (conf.name, conf.cni_version, [p.type for p in conf.plugins]) == (net, version, types)
    assert conf.raw == (ex / name).read_bytes()
    assert conf.source == str(ex / name)


BAD = {
    "bad-missing-name.conflist": "error parsing configuration list: no name",
    "bad-name-not-string.conflist": "error parsing configuration list: invalid name type float64",
    "bad-truncated-json.conflist": "error parsing configuration list: unexpected end of JSON input",
    "bad-empty-file.conflist": "error parsing configuration list: unexpected end of JSON input",
    "bad-empty-plugins.conflist": "error parsing configuration list: no plugins in list",
    "bad-plugins-not-list.conflist":
        "error parsing configuration list: invalid 'plugins' type map[string]interface {}",
    "bad-plugin-missing-type.conflist":
        "failed to parse plugin config 1: error parsing configuration: missing 'type'",
    "bad-disablecheck-value.conflist":
        'error parsing configuration list: invalid value "yes" for disableCheck',
    "bad-disablegc-number.conflist":
        "error parsing configuration list: invalid type float64 for disableGC",
    "bad-cniversions-entry.conflist":
        "error parsing configuration list: invalid cniVersions entry 1.0.f at index 1: ",
    "bad-cniversions-not-list.conflist":
        "error parsing configuration list: invalid type for cniVersions: string",
    "bad-cniversion-number.conflist":
        "error parsing configuration list: invalid cniVersion type float64",
    "bad-loadonlyinlined-without-plugins.conflist":
        "error parsing configuration list: `loadOnlyInlinedPlugins` is true, and no 'plugins' key",
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_conflists_give_libcni_errors(ex: Path, name: str) -> None:
    path = ex / "bad" / name
    with pytest.raises(ConfigError) as info:
        cni.load_conflist(path)
    assert info.value.message.startswith(BAD[name])
    assert str(path) in str(info.value)
    assert isinstance(info.value, cni.ConfigError) and isinstance(info.value, ValueError)


def test_every_bad_fixture_is_covered(ex: Path) -> None:
    runtime_bad = {p.split("/")[1] for p in GOOD if p.startswith("bad/")}
    files = {p.name for p in (ex / "bad").iterdir()}
    assert files == set(BAD) | runtime_bad | {"bad-conf-without-type.conf"}


def test_conf_without_type(ex: Path) -> None:
    with pytest.raises(ConfigError, match="error parsing configuration: missing 'type'"):
        cni.load_conf(ex / "bad" / "bad-conf-without-type.conf")


def test_legacy_conf_is_up_converted(ex: Path) -> None:
    conf = cni.load_conf(ex / "bridge-0.2.0.conf")
    assert (conf.name, conf.cni_version) == ("pk-legacy-conf", "0.2.0")
    assert [p.type for p in conf.plugins] == ["bridge"]
    plugin = conf.plugins[0].to_dict()
    assert plugin["ipam"]["subnet"] == "10.88.8.0/24"
    assert conf.to_dict()["plugins"][0] == plugin
    lo = cni.load_conf(ex / "loopback.conf")
    assert (lo.name, lo.cni_version, lo.plugins[0].type) == ("cni-loopback", "0.3.1", "loopback")


def test_flags_and_string_booleans(ex: Path) -> None:
    conf = cni.load_conflist(ex / "string-booleans.conflist")
    assert conf.disable_check is True and conf.disable_gc is False
    conf = cni.load_conflist(ex / "bridge-hostlocal-portmap-disablecheck.conflist")
    assert conf.disable_check is True and conf.disable_gc is True
    conf = NetworkConfigList.from_bytes(
        b'{"name":"n","cniVersion":"1.0.0","disableGC":"True","plugins":[{"type":"x"}]}')
    assert conf.disable_gc is True and conf.disable_check is False


def test_cniversions_selection() -> None:
    def pick(doc: str) -> str:
        return NetworkConfigList.from_bytes(doc.encode()).cni_version

    plugins = '"plugins":[{"type":"x"}]'
    assert pick('{"name":"n","cniVersion":"0.4.0","cniVersions":["0.3.1","1.0.0"],' + plugins
                + "}") == "1.0.0"
    assert pick('{"name":"n","cniVersion":"1.0.0","cniVersions":["0.4.0","1.1.0","9.9.9"],'
                + plugins + "}") == "1.1.0"
    assert pick('{"name":"n","cniVersion":"1.0.0","cniVersions":["0.4.0"],' + plugins
                + "}") == "1.0.0"
    assert pick('{"name":"n","cniVersions":["9.9.9"],' + plugins + "}") == ""
    assert pick('{"name":"n","cniVersion":"x.y",' + plugins + "}") == "x.y"
    assert pick('{"name":"n","cniVersions":["1.0"],' + plugins + "}") == "1.0"


def test_sibling_directory_plugins(ex: Path) -> None:
    conf = cni.load_conflist(ex / "subdir-plugins" / "10-pk-subdir.conflist")
    portmap = conf.plugins[1]
    assert portmap.raw == (ex / "subdir-plugins" / "pk-subdir" / "10-portmap.conf").read_bytes()
    assert portmap.source and portmap.source.endswith("pk-subdir/10-portmap.conf")
    assert conf.capabilities == ("portMappings",)
    # inlined objects are re-marshalled like libcni (compact, sorted)
    assert conf.plugins[0].raw.startswith(b'{"bridge":"pk-br13","ipam":')
    inlined = cni.load_conflist(ex / "inlined-only" / "10-pk-inlined.conflist")
    assert [p.type for p in inlined.plugins] == ["loopback"]
    assert inlined.load_only_inlined_plugins


def test_no_plugins_anywhere(tmp_path: Path) -> None:
    (tmp_path / "a.conflist").write_text('{"name":"empty","cniVersion":"1.0.0"}')
    with pytest.raises(ConfigError, match="no plugin configs found"):
        cni.load_conflist(tmp_path / "a.conflist")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "x.conf").write_text('{"cniVersion":"1.0.0"}')
    with pytest.raises(ConfigError, match="missing 'type'") as info:
        cni.load_conflist(tmp_path / "a.conflist")
    assert "empty/x.conf" in str(info.value)


def test_load_network_by_name(ex: Path, tmp_path: Path) -> None:
    for name in ("loopback.conflist", "ptp.conflist", "bridge-0.2.0.conf", "loopback.conf"):
        shutil.copy(ex / name, tmp_path / name)
    assert cni.load_network(tmp_path, "pk-ptp").plugins[0].type == "ptp"
    legacy = cni.load_network(tmp_path, "pk-legacy-conf")
    assert legacy.cni_version == "0.2.0" and legacy.plugins[0].type == "bridge"
    with pytest.raises(cni.NetworkNotFoundError, match='no net configuration with name "nope"'):
        cni.load_network(tmp_path, "nope")
    with pytest.raises(cni.NoConfigsFoundError, match="no net configurations found"):
        cni.load_network(tmp_path / "missing", "x")
    nets = cni.load_networks(tmp_path)
    assert [n.name for n in nets] == ["pk-legacy-conf", "cni-loopback", "pk-loopback", "pk-ptp"]
    # an unparsable conflist aborts the search, naming the file (libcni behaviour)
    shutil.copy(ex / "bad" / "bad-missing-name.conflist", tmp_path / "00-bad.conflist")
    with pytest.raises(ConfigError, match=re.escape("00-bad.conflist")):
        cni.load_network(tmp_path, "pk-ptp")
    with pytest.raises(ConfigError, match="no name"):
        cni.load_networks(tmp_path)


def test_conf_files_extension_match(tmp_path: Path) -> None:
    for n in ("a.conflist", "b.conflist.bak", "c.conf", "d.json", "e.CONF"):
        (tmp_path / n).write_text("{}")
    (tmp_path / "dir.conf").mkdir()
    assert [Path(p).name for p in conf_files(tmp_path, (".conf", ".json"))] == ["c.conf", "d.json"]


def test_models_are_frozen(ex: Path) -> None:
    conf = cni.load_conflist(ex / "ptp.conflist")
    with pytest.raises(AttributeError):
        conf.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        conf.plugins[0].capabilities["x"] = True  # type: ignore[index]
    d = conf.plugins[0].to_dict()
    d["type"] = "changed"
    assert conf.plugins[0].to_dict()["type"] == "ptp"
