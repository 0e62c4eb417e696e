"""podkit.cni.client against the scripted FakeExec: libcni parity (replayed recording), cache,
rollback, pre-flight, CHECK/DEL/STATUS/GC semantics."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

from podkit import cni
from podkit.cni.testing import FakeCall, FakeExec
from podkit.errors import InvalidArgumentError

SHIM = "/opt/cni/shim"
CAPS = {"bandwidth": {"egressBurst": 100000, "egressRate": 1000000, "ingressBurst": 100000,
                      "ingressRate": 1000000},
        "mac": "0e:00:00:00:88:02",
        "portMappings": [{"containerPort": 80, "hostPort": 18081, "protocol": "tcp"}],
        "unusedCap": True}
ARGS = (("IgnoreUnknown", "1"), ("K8S_POD_NAMESPACE", "default"), ("K8S_POD_NAME", "pod1"))


def examples(shared: Path) -> Path:
    return shared / "fixtures" / "cni" / "examples"


def _recorded(shared: Path) -> list[dict[str, Any]]:
    path = shared / "fixtures/cni/recorded/libcni/libcni-add-del-invocations.json"
    calls: list[dict[str, Any]] = json.loads(path.read_text())["calls"]
    return [c for c in calls if c["plugin"] != "host-local"]  # delegated by bridge itself


def test_add_del_replay_matches_libcni_bytes(shared: Path, tmp_path: Path) -> None:
    """Replay libcni's recorded run: every stdin, env and the cache file must be identical."""
    calls = _recorded(shared)
    fake = FakeExec()
    for c in calls:
        fake.on(c["plugin"], c["command"], stdout=c["stdout"].encode(), times=1)
    conf = cni.load_conflist(examples(shared) / "with-tuning-bandwidth-firewall.conflist")
    client = cni.CNI([SHIM], cache_dir=tmp_path, exec=fake, env={"PATH": "/usr/bin"})
    rt = cni.RuntimeConf("ctr-rec1", "/run/netns/pkr-c1", "eth0", ARGS, CAPS)
    result = client.add(conf, rt)
    assert result.interfaces[3].name == "bwp3459d4a3d425"

    cache_file = tmp_path / "results" / "pk-full-ctr-rec1-eth0"
    recorded_cache = (shared / "fixtures/cni/recorded/libcni/"
                      "cache-file-pk-full-ctr-rec1-eth0.json").read_bytes()
    assert cache_file.read_bytes() == recorded_cache.rstrip(b"\n")
    assert oct(cache_file.stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_path / "results").stat().st_mode & 0o777) == "0o700"

    client.delete(conf, rt)
    assert not cache_file.exists()
    made = [c for c in fake.calls if c.command != "VERSION"]
    assert [(c.plugin, c.command) for c in made] == [(c["plugin"], c["command"]) for c in calls]
    for mine, theirs in zip(made, calls, strict=True):
        assert mine.stdin == theirs["stdin"].encode(), (mine.plugin, mine.command)
        assert {k: v for k, v in mine.env.items() if k.startswith("CNI_")} == theirs["env"]
        assert mine.env["PATH"] == "/usr/bin"


def _conf(doc: dict[str, Any]) -> cni.NetworkConfigList:
    return cni.NetworkConfigList.from_bytes(json.dumps(doc).encode())


def _net(version: str = "1.0.0", *plugins: str, **extra: Any) -> cni.NetworkConfigList:
    return _conf({"cniVersion": version, "name": "pk-net",
                  "plugins": [{"type": p} for p in plugins or ("a", "b", "c")], **extra})


RES = {"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": "/run/netns/x"}],
       "ips": [{"address": "10.88.0.5/16", "interface": 0}]}
RT = cni.RuntimeConf("c1", "/run/netns/x", "eth0")


@pytest.fixture
def fake() -> FakeExec:
    f = FakeExec()
    f.on("a", "ADD", result=RES)
    return f


@pytest.fixture
def client(fake: FakeExec, tmp_path: Path) -> cni.CNI:
    return cni.CNI(["/opt/cni/bin"], cache_dir=tmp_path, exec=fake)


def _cmds(fake: FakeExec) -> list[tuple[str, str]]:
    return [(c.plugin, c.command) for c in fake.calls if c.command != "VERSION"]


def test_chain_order_and_prev_result(client: cni.CNI, fake: FakeExec) -> None:
    conf = _net()
    client.add(conf, RT)
    client.check(conf, RT)
    client.delete(conf, RT)
    assert _cmds(fake) == [("a", "ADD"), ("b", "ADD"), ("c", "ADD"), ("a", "CHECK"),
                           ("b", "CHECK"), ("c", "CHECK"), ("c", "DEL"), ("b", "DEL"),
                           ("a", "DEL")]
    adds = fake.calls_for("ADD")
    assert "prevResult" not in adds[0].config
    assert adds[1].config["prevResult"] == RES
    for call in fake.calls_for("CHECK") + fake.calls_for("DEL"):
        assert call.config["prevResult"] == RES  # the cached final result, for every plugin


def test_result_without_version_is_labelled_with_config_version(
        client: cni.CNI, fake: FakeExec) -> None:
    fake.on("a", "ADD", result={"ips": [{"address": "10.88.0.5/16"}]})
    res = client.add(_net("0.4.0", "a"), RT)
    assert res.cni_version == "0.4.0" and res.ips[0].version is None
    assert res.to_dict()["ips"][0]["version"] == "4"


def test_add_validates_names_before_running(client: cni.CNI, fake: FakeExec) -> None:
    bad = [
        (_conf({"cniVersion": "1.0.0", "name": "pk bad/name", "plugins": [{"type": "a"}]}), RT,
         7, "invalid characters found in network name"),
        (_net(), cni.RuntimeConf("", "/x", "eth0"), 3, "missing containerID"),
        (_net(), cni.RuntimeConf("bad/id", "/x", "eth0"), 4, "invalid characters in containerID"),
        (_net(), cni.RuntimeConf("c1", "/x", "a" * 16), 4, "interface name is too long"),
        (_net(), cni.RuntimeConf("c1", "/x", "eth 0"), 4, "whitespace"),
    ]
    for conf, rt, code, text in bad:
        with pytest.raises(cni.CNIError) as info:
            client.add(conf, rt)
        assert info.value.code == code and text in str(info.value)
    assert fake.calls == []


def test_plugin_type_with_path_is_refused(client: cni.CNI, fake: FakeExec,
                                          shared: Path) -> None:
    conf = cni.load_conflist(examples(shared) / "bad/bad-plugin-type-with-path.conflist")
    with pytest.raises(cni.InvalidPluginNameError, match=r"invalid plugin name: \.\./\.\./usr"):
        client.add(conf, RT)
    assert fake.calls == []


def test_missing_plugin_fails_before_anything_runs(tmp_path: Path, shared: Path) -> None:
    fake = FakeExec(plugins=["loopback"])
    client = cni.CNI(["/opt/cni/bin"], cache_dir=tmp_path, exec=fake)
    conf = cni.load_conflist(shared / "fixtures/cni/examples/bad/bad-plugin-not-found.conflist")
    with pytest.raises(cni.PluginNotFoundError) as info:
        client.add(conf, RT)
    msg = str(info.value)
    assert 'failed to find plugin "podkit-no-such-plugin" in path [/opt/cni/bin]' in msg
    assert 'network "pk-missingbin"' in msg and 'container "c1"' in msg
    assert fake.calls == []
    assert client.cached_attachments() == []


def test_version_preflight_refuses_impossible_list(tmp_path: Path, shared: Path) -> None:
    fake = FakeExec()
    fake.on("firewall", "VERSION", result={"cniVersion": "1.0.0",
                                           "supportedVersions": ["0.4.0", "1.0.0"]})
    client = cni.CNI(["/opt/cni/bin"], cache_dir=tmp_path, exec=fake)
    conf = cni.load_conflist(shared / "fixtures/cni/examples/bad/bad-firewall-0.3.1.conflist")
    with pytest.raises(cni.CNIError) as info:
        client.add(conf, RT)
    assert info.value.code == cni.ERR_INCOMPATIBLE_VERSION and info.value.plugin == "firewall"
    assert 'config is "0.3.1"' in info.value.details
    assert _cmds(fake) == []  # nothing ran, nothing to undo
    with pytest.raises(cni.CNIError, match='plugin firewall does not support config version'):
        client.validate(conf)


def test_version_answers_cached_by_path_and_mtime(tmp_path: Path) -> None:
    plugin_dir = tmp_path / "bin"
    plugin_dir.mkdir()
    (plugin_dir / "a").write_text("")
    fake = FakeExec()
    client = cni.CNI([str(plugin_dir)], cache_dir=tmp_path / "cache", exec=fake)
    conf = _net("1.0.0", "a")
    client.add(conf, RT)
    client.add(conf, cni.RuntimeConf("c2", "/x", "eth0"))
    assert len(fake.calls_for("VERSION")) == 1
    os.utime(plugin_dir / "a", ns=(1, 1))  # binary replaced: ask again
    client.add(conf, cni.RuntimeConf("c3", "/x", "eth0"))
    assert len(fake.calls_for("VERSION")) == 2
    version_env = fake.calls_for("VERSION")[0].env
    assert (version_env["CNI_NETNS"], version_env["CNI_IFNAME"], version_env["CNI_PATH"]) == (
        "dummy", "dummy", "dummy")
    assert fake.calls_for("VERSION")[0].stdin == b'{"cniVersion":"1.1.0"}'


def test_unknown_version_command_means_0_1_0(client: cni.CNI, fake: FakeExec) -> None:
    fake.on("old", "VERSION", error=cni.CNIError(4, "unknown CNI_COMMAND: VERSION"))
    assert client.plugin_versions("old").supported_versions == ("0.1.0",)


def test_failed_add_rolls_back_in_reverse(client: cni.CNI, fake: FakeExec) -> None:
    fake.on("c", "ADD", error=cni.CNIError(999, "boom"))
    with pytest.raises(cni.CNIError) as info:
        client.add(_net(), RT)
    err = info.value
    assert (err.code, err.plugin, err.command, err.rollback_errors) == (999, "c", "ADD", ())
    assert str(err) == ('network "pk-net", container "c1", ifname "eth0": plugin type="c" '
                        "failed (add): boom")
    assert _cmds(fake)[3:] == [("c", "DEL"), ("b", "DEL"), ("a", "DEL")]
    assert fake.calls_for("DEL")[0].config["prevResult"] == RES
    assert client.cached_attachments() == []


def test_rollback_errors_are_attached(client: cni.CNI, fake: FakeExec) -> None:
    fake.on("b", "ADD", error=cni.CNIError(999, "add broke"))
    fake.on("a", "DEL", error=cni.CNIError(5, "del broke"))
    with pytest.raises(cni.CNIError) as info:
        client.add(_net(), RT)
    assert info.value.msg == "add broke"
    assert [e.msg for e in info.value.rollback_errors] == ["del broke"]
    assert "rollback also failed" in str(info.value)
    assert _cmds(fake)[2:] == [("b", "DEL"), ("a", "DEL")]


def test_timeout_in_add_rolls_back(client: cni.CNI, fake: FakeExec) -> None:
    from podkit.cni.testing import timeout_error
    fake.on("b", "ADD", error=timeout_error(1))
    with pytest.raises(cni.PluginTimeoutError):
        client.add(_net(), RT)
    assert _cmds(fake)[2:] == [("b", "DEL"), ("a", "DEL")]


def test_unparsable_result_rolls_back(client: cni.CNI, fake: FakeExec) -> None:
    fake.on("b", "ADD", stdout=b"")
    with pytest.raises(cni.CNIError, match="failed to unmarshal raw result"):
        client.add(_net(), RT)
    assert ("a", "DEL") in _cmds(fake)


def test_check_semantics(client: cni.CNI, fake: FakeExec, tmp_path: Path) -> None:
    with pytest.raises(cni.CNIError, match=r'configuration version "0\.3\.1" does not support'):
        client.check(_net("0.3.1", disableCheck=True), RT)
    client.check(_net(disableCheck=True), RT)  # no exec at all
    assert fake.calls == []
    with pytest.raises(cni.CNIError, match=r"CHECK needs a successful ADD"):
        client.check(_net(), RT)
    conf = _net()
    client.add(conf, RT)
    (tmp_path / "results" / "pk-net-c1-eth0").write_text("garbage")
    with pytest.raises(cni.CNIError, match='failed to get network "pk-net" cached result'):
        client.check(conf, RT)
    fake.calls.clear()
    fake.on("b", "CHECK", error=cni.CNIError(999, "mismatch"))
    client.add(conf, cni.RuntimeConf("c2", "/x", "eth0"))
    with pytest.raises(cni.CNIError, match="mismatch") as info:
        client.check(conf, cni.RuntimeConf("c2", "/x", "eth0"))
    assert info.value.code == 999 and info.value.command == "CHECK"


@pytest.mark.parametrize("content", [b"", b"garbage", b'{"cniVersion":"9.9.9"}'])
def test_corrupt_cache_never_blocks_delete(client: cni.CNI, fake: FakeExec, tmp_path: Path,
                                           content: bytes) -> None:
    conf = _net()
    client.add(conf, RT)
    cache_file = tmp_path / "results" / "pk-net-c1-eth0"
    cache_file.write_bytes(content)
    client.delete(conf, RT)
    assert not cache_file.exists()
    assert all("prevResult" not in c.config for c in fake.calls_for("DEL"))


def test_delete_failure_keeps_cache_for_retry(client: cni.CNI, fake: FakeExec,
                                              tmp_path: Path) -> None:
    conf = _net()
    client.add(conf, RT)
    fake.on("b", "DEL", error=cni.CNIError(999, "busy"), times=1)
    with pytest.raises(cni.CNIError, match="busy"):
        client.delete(conf, RT)
    assert (tmp_path / "results" / "pk-net-c1-eth0").exists()
    client.delete(conf, RT)
    assert not (tmp_path / "results" / "pk-net-c1-eth0").exists()
    client.delete(conf, RT)  # DEL twice is fine
    assert fake.calls_for("DEL")[-1].config.get("prevResult") is None


def test_delete_of_old_list_sends_no_prev_result(client: cni.CNI, fake: FakeExec) -> None:
    conf = _net("0.3.1", "a")
    fake.on("a", "ADD", result={**RES, "cniVersion": "0.3.1"})
    client.add(conf, RT)
    client.delete(conf, RT)
    assert "prevResult" not in fake.calls_for("DEL")[0].config


def test_legacy_bare_cache_is_converted(client: cni.CNI, fake: FakeExec, tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "pk-net-c1-eth0").write_text(
        '{"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.1.0.2/24"}]}')
    conf = _net("1.0.0", "a")
    assert client.cached_result(conf, RT) == cni.parse_result(
        {"cniVersion": "1.0.0", "ips": [{"address": "10.1.0.2/24"}]})
    with pytest.raises(cni.CacheError, match="wrong kind"):
        client.cached_config(conf, RT)
    client.check(conf, RT)
    assert fake.calls_for("CHECK")[0].config["prevResult"] == {
        "cniVersion": "1.0.0", "ips": [{"address": "10.1.0.2/24"}]}


def test_cached_config_and_attachments(client: cni.CNI) -> None:
    conf = _net()
    rt = cni.RuntimeConf("c1", "/run/netns/x", "eth0", (("IgnoreUnknown", "1"),),
                         {"portMappings": []})
    client.add(conf, rt)
    assert client.cached_config(conf, cni.RuntimeConf("c1", "", "eth0")) == (conf.raw, rt.__class__(
        "c1", "", "eth0", (("IgnoreUnknown", "1"),), {"portMappings": []}))
    [att] = client.cached_attachments("c1")
    assert (att.container_id, att.network, att.ifname, att.netns) == ("c1", "pk-net", "eth0",
                                                                      "/run/netns/x")
    assert client.cached_attachments("c") == []
    assert client.cached_result(conf, cni.RuntimeConf("zz", "", "eth0")) is None
    assert client.cached_config(conf, cni.RuntimeConf("zz", "", "eth0")) is None


def test_status(client: cni.CNI, fake: FakeExec) -> None:
    with pytest.raises(cni.UnsupportedCommandError) as old:
        client.status(_net("1.0.0"))
    assert old.value.code == cni.ERR_INCOMPATIBLE_VERSION and old.value.network == "pk-net"
    assert 'version "1.0.0" does not support the STATUS command' in str(old.value)
    assert fake.calls == []
    conf = _net("1.1.0")
    fake.on("b", "STATUS", error=cni.CNIError(50, "plugin not available"))
    with pytest.raises(cni.CNIError) as info:
        client.status(conf)
    assert info.value.code == cni.ERR_PLUGIN_NOT_AVAILABLE and info.value.plugin == "b"
    assert _cmds(fake) == [("a", "STATUS"), ("b", "STATUS")]
    call = fake.calls_for("STATUS")[0]
    assert call.stdin == b'{"cniVersion":"1.1.0","name":"pk-net","type":"a"}'
    assert {k for k, v in call.env.items() if k.startswith("CNI_") and v} == {
        "CNI_COMMAND", "CNI_PATH"}


def test_gc_deletes_stale_then_sends_gc(client: cni.CNI, fake: FakeExec) -> None:
    conf = _net("1.1.0")
    other = _conf({"cniVersion": "1.1.0", "name": "other", "plugins": [{"type": "a"}]})
    client.add(conf, cni.RuntimeConf("c1", "/n1", "eth0"))
    client.add(conf, cni.RuntimeConf("c2", "/n2", "eth0", (("K", "v"),), {"x": 1}))
    client.add(other, cni.RuntimeConf("c3", "/n3", "eth0"))
    fake.calls.clear()
    client.gc(conf, [("c1", "eth0")])
    assert _cmds(fake) == [("c", "DEL"), ("b", "DEL"), ("a", "DEL"), ("a", "GC"), ("b", "GC"),
                           ("c", "GC")]
    dele = fake.calls_for("DEL")[0]
    assert (dele.env["CNI_CONTAINERID"], dele.env["CNI_NETNS"], dele.env["CNI_ARGS"]) == (
        "c2", "/n2", "K=v")
    gc = fake.calls_for("GC")[0].config
    assert gc["cni.dev/valid-attachments"] == [{"containerID": "c1", "ifname": "eth0"}]
    assert gc["cni.dev/attachments"] == gc["cni.dev/valid-attachments"]
    assert [a.container_id for a in client.cached_attachments()] == ["c3", "c1"] or sorted(
        a.container_id for a in client.cached_attachments()) == ["c1", "c3"]


def test_gc_collects_errors_and_respects_disable(client: cni.CNI, fake: FakeExec) -> None:
    client.gc(_net("1.1.0", disableGC="true"), [])
    assert fake.calls == []
    fake.on("a", "GC", error=cni.CNIError(999, "gc a"))
    fake.on("c", "GC", error=cni.CNIError(999, "gc c"))
    with pytest.raises(cni.GCError) as info:
        client.gc(_net("1.1.0"), None)
    assert [e.msg for e in info.value.errors] == ["gc a", "gc c"]  # b still ran
    assert ("b", "GC") in _cmds(fake)
    fake.calls.clear()
    with pytest.raises(cni.UnsupportedCommandError, match="does not support the GC command"):
        client.gc(_net("1.0.0"), [])  # no GC verb below 1.1.0
    assert fake.calls == []


def test_gc_below_1_1_0_runs_nothing_not_even_stale_dels(client: cni.CNI,
                                                         fake: FakeExec) -> None:
    conf = _net("1.0.0")
    client.add(conf, cni.RuntimeConf("c2", "/n2", "eth0"))
    fake.calls.clear()
    with pytest.raises(cni.UnsupportedCommandError):
        client.gc(conf, None)
    assert fake.calls == []
    assert [a.container_id for a in client.cached_attachments()] == ["c2"]


def test_status_and_gc_preflight_refuses_plugins_without_1_1_0(tmp_path: Path) -> None:
    """Plugins older than CNI 1.1 do not know STATUS/GC: refused before anything runs."""
    fake = FakeExec(versions=("0.3.1", "0.4.0", "1.0.0"))
    client = cni.CNI(["/opt/cni/bin"], cache_dir=tmp_path, exec=fake)
    for verb in (client.status, lambda c: client.gc(c, [])):
        with pytest.raises(cni.IncompatibleVersionError) as info:
            verb(_net("1.1.0"))
        assert info.value.plugin == "a" and "nothing was run" in str(info.value)
        assert 'config is "1.1.0"' in str(info.value)
    assert _cmds(fake) == []


def test_del_uses_the_cached_runtime_config(client: cni.CNI, fake: FakeExec) -> None:
    """DEL without the ADD's capability/CNI args gets them from the cache (libcni's GC, CRI-O)."""
    conf = _conf({"cniVersion": "1.0.0", "name": "pk-net", "plugins": [
        {"type": "a"}, {"type": "pm", "capabilities": {"portMappings": True}}]})
    pm = [{"containerPort": 80, "hostPort": 8080, "protocol": "tcp"}]
    client.add(conf, cni.RuntimeConf("c1", "/n1", "eth0", (("K", "v"),),
                                     {"portMappings": pm}))
    fake.calls.clear()
    client.delete(conf, cni.RuntimeConf("c1", "/n1", "eth0"))
    dels = fake.calls_for("DEL")
    assert [c.plugin for c in dels] == ["pm", "a"]
    assert dels[0].config["runtimeConfig"] == {"portMappings": pm}
    assert all(c.env["CNI_ARGS"] == "K=v" for c in dels)
    assert client.cached_attachments() == []


def test_del_cached_keys_win_and_caller_keys_fill_in(client: cni.CNI, fake: FakeExec) -> None:
    conf = _conf({"cniVersion": "0.3.1", "name": "pk-net", "plugins": [
        {"type": "a", "capabilities": {"portMappings": True, "mac": True}}]})
    client.add(conf, cni.RuntimeConf("c1", "/n1", "eth0",
                                     capability_args={"portMappings": [{"hostPort": 1}]}))
    fake.calls.clear()
    client.delete(conf, cni.RuntimeConf("c1", "/n1", "eth0", (("X", "y"),), {
        "portMappings": [{"hostPort": 2}], "mac": "0e:00:00:00:00:01"}))
    [dele] = fake.calls_for("DEL")
    assert dele.config["runtimeConfig"] == {"portMappings": [{"hostPort": 1}],
                                            "mac": "0e:00:00:00:00:01"}
    assert dele.env["CNI_ARGS"] == "X=y"  # the ADD had none: the caller's are used
    assert "prevResult" not in dele.config  # below 0.4.0


def test_del_with_unconvertible_result_keeps_cached_runtime_config(
        client: cni.CNI, fake: FakeExec, tmp_path: Path) -> None:
    conf = _net("1.0.0", "a")
    rt = cni.RuntimeConf("c1", "/n1", "eth0", capability_args={"k": 1})
    client.add(conf, rt)
    path = tmp_path / "results" / "pk-net-c1-eth0"
    doc = json.loads(path.read_bytes())
    doc["result"] = {"cniVersion": "9.9.9"}
    path.write_text(json.dumps(doc))
    fake.calls.clear()
    conf2 = _conf({"cniVersion": "1.0.0", "name": "pk-net", "plugins": [
        {"type": "a", "capabilities": {"k": True}}]})
    client.delete(conf2, cni.RuntimeConf("c1", "/n1", "eth0"))
    [dele] = fake.calls_for("DEL")
    assert dele.config["runtimeConfig"] == {"k": 1} and "prevResult" not in dele.config
    assert not path.exists()


def test_cache_write_failure_rolls_back(fake: FakeExec, tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "results").write_text("not a dir")
    client = cni.CNI(["/opt/cni/bin"], cache_dir=tmp_path / "cache", exec=fake)
    with pytest.raises(cni.CNIError, match='failed to set network "pk-net" cached result'):
        client.add(_net(), RT)
    assert _cmds(fake)[-3:] == [("c", "DEL"), ("b", "DEL"), ("a", "DEL")]


def test_fake_exec_handler_sees_call() -> None:
    seen: list[FakeCall] = []
    fake = FakeExec()
    fake.on("a", "ADD", handler=lambda call: seen.append(call) or {"cniVersion": "1.0.0"})
    out = fake.exec_plugin("/p/a", b'{"x":1}', {"CNI_COMMAND": "ADD"}, None)
    assert json.loads(out) == {"cniVersion": "1.0.0"} and seen[0].config == {"x": 1}


def test_cache_entry_encoding_is_libcni_shaped(tmp_path: Path) -> None:
    cache = cni.ResultCache(tmp_path)
    cache.write("n", "c", "eth0", config=b"{}", result=cni.parse_result(RES))
    doc = json.loads((tmp_path / "results" / "n-c-eth0").read_bytes())
    assert list(doc) == ["kind", "containerId", "config", "ifName", "networkName", "result"]
    assert base64.b64decode(doc["config"]) == b"{}"
    with pytest.raises(InvalidArgumentError, match="cache file path requires network name"):
        cache.path("", "c", "eth0")


def test_second_add_is_refused_before_running(client: cni.CNI, fake: FakeExec) -> None:
    conf = _net()
    client.add(conf, RT)
    fake.calls.clear()
    with pytest.raises(cni.AttachmentExistsError, match="DEL it before adding it again") as info:
        client.add(conf, RT)
    assert isinstance(info.value, cni.CNIError) and info.value.network == "pk-net"
    assert fake.calls == []  # no ADD, and above all no rollback DEL of the live attachment
    client.delete(conf, RT)
    client.add(conf, RT)
