"""podkit.cni.invoke: request building, env, error mapping, lookup, VERSION decoding, RawExec."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from podkit import cni
from podkit.cni.config import NetworkConfigList
from podkit.cni.invoke import (
    CNI_ENV_VARS,
    RawExec,
    build_gc_request,
    build_request,
    build_status_request,
    decode_version_info,
    find_in_path,
    parse_error_output,
    plugin_env,
)

PLUGINS = Path(__file__).resolve().parent / "plugins"


def test_env_is_caller_env_plus_six_cni_vars() -> None:
    env = plugin_env("ADD", container_id="c1", netns="/run/netns/x", ifname="eth0",
                     args=[("IgnoreUnknown", "1"), ("K", "v")], path=["/a", "/b"],
                     base={"PATH": "/usr/bin", "CNI_ARGS": "stale"})
    assert env == {"PATH": "/usr/bin", "CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1",
                   "CNI_NETNS": "/run/netns/x", "CNI_ARGS": "IgnoreUnknown=1;K=v",
                   "CNI_IFNAME": "eth0", "CNI_PATH": "/a:/b"}
    status = plugin_env("STATUS", path=["/a"], base={})
    assert set(status) == set(CNI_ENV_VARS)
    assert [k for k, v in status.items() if v] == ["CNI_COMMAND", "CNI_PATH"]
    assert "PATH" in plugin_env("DEL")  # default base is this process's environment


def _plugin(doc: str) -> cni.PluginConfig:
    conf = NetworkConfigList.from_bytes(
        ('{"name":"orig","cniVersion":"0.1.0","plugins":[' + doc + "]}").encode())
    return conf.plugins[0]


def test_request_injects_name_version_and_declared_caps_only() -> None:
    plugin = _plugin('{"type":"fakeA","capabilities":{"portMappings":true,"mac":false},'
                     '"k":"v","name":"own","cniVersion":"0.3.1"}')
    caps = {"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
            "mac": "0e:00:00:00:00:01", "ips": ["10.0.0.5"]}
    # the exact bytes libcni sent in the recorded run (cni-empirical.md section 6)
    assert build_request(plugin, "hk", "1.0.0", None, caps) == (
        b'{"capabilities":{"mac":false,"portMappings":true},"cniVersion":"1.0.0","k":"v",'
        b'"name":"hk","runtimeConfig":{"portMappings":[{"containerPort":80,"hostPort":8080,'
        b'"protocol":"tcp"}]},"type":"fakeA"}')
    prev = cni.parse_result(b'{"cniVersion":"1.0.0","ips":[{"address":"10.88.0.5/16"}],'
                            b'"dns":{}}')
    plain = _plugin('{"type":"fakeB","capabilities":{"bandwidth":true}}')
    assert build_request(plain, "hk", "1.0.0", prev, caps) == (
        b'{"capabilities":{"bandwidth":true},"cniVersion":"1.0.0","name":"hk","prevResult":'
        b'{"cniVersion":"1.0.0","ips":[{"address":"10.88.0.5/16"}]},"type":"fakeB"}')
    # an empty runtimeConfig is never added; an existing one is kept then
    kept = _plugin('{"type":"x","runtimeConfig":{"a":1}}')
    assert b'"runtimeConfig":{"a":1}' in build_request(kept, "n", "1.0.0", None, caps)


def test_request_escapes_like_go() -> None:
    plugin = _plugin('{"type":"x","note":"<a&b> \u2028 é"}')
    assert b'"note":"\\u003ca\\u0026b\\u003e \\u2028 \xc3\xa9"' in build_request(
        plugin, "n", "1.0.0")


def test_status_and_gc_requests() -> None:
    plugin = _plugin('{"type":"fakeA","capabilities":{"portMappings":true}}')
    assert build_status_request(plugin, "hk11", "1.1.0") == (
        b'{"capabilities":{"portMappings":true},"cniVersion":"1.1.0","name":"hk11",'
        b'"type":"fakeA"}')
    assert build_gc_request(plugin, "hk11", "1.1.0", [("c1", "eth0")]) == (
        b'{"capabilities":{"portMappings":true},"cni.dev/attachments":[{"containerID":"c1",'
        b'"ifname":"eth0"}],"cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"}],'
        b'"cniVersion":"1.1.0","name":"hk11","type":"fakeA"}')
    assert b'"cni.dev/valid-attachments":null' in build_gc_request(plugin, "n", "1.1.0", None)


def test_error_output_mapping() -> None:
    e = parse_error_output(b'{"code":7,"msg":"Invalid Configuration","details":"too small"}',
                           b"", "exit status 1")
    assert (e.code, e.msg, e.details) == (7, "Invalid Configuration", "too small")
    e = parse_error_output(b"", b"boom\n", "exit status 2")
    assert (e.code, e.msg, e.stderr) == (0, 'netplugin failed: "boom": exit status 2', "boom\n")
    e = parse_error_output(b"not json", b"", "exit status 1")
    assert e.code == 0
    assert e.msg.startswith('netplugin failed but error parsing its diagnostic message "not json"')
    e = parse_error_output(b"", b"", "exit status 3")
    assert e.msg == "netplugin failed with no error message: exit status 3"
    e = parse_error_output(b'{"code":"x","msg":"m"}', b"", "exit status 1")
    assert e.code == 0 and "error parsing its diagnostic message" in e.msg


def test_recorded_plugin_errors_parse(shared: Path) -> None:
    errors = shared / "fixtures" / "cni" / "recorded" / "errors"
    seen = 0
    for f in sorted(errors.glob("*.json")):
        rec = json.loads(f.read_text())
        if rec["rc"] == 0:
            continue
        e = parse_error_output(rec["stdout"].encode(), rec["stderr"].encode(),
                               f"exit status {rec['rc']}")
        if rec["stdout"].strip():
            assert e.code == json.loads(rec["stdout"])["code"], f.name
        else:
            assert e.code == 0 and e.msg.startswith("netplugin failed"), f.name
        seen += 1
    assert seen >= 20
    panic = json.loads((errors / "bandwidth-add-without-prevResult-panics.json").read_text())
    e = parse_error_output(b"", panic["stderr"].encode(), "exit status 2")
    assert "panic: runtime error" in e.msg and e.msg.endswith("exit status 2")


def test_find_in_path(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (b / "p").write_text("")
    (a / "d").mkdir()
    assert find_in_path("p", [str(a), str(b)]) == str(b / "p")
    with pytest.raises(cni.InvalidPluginNameError, match=r"invalid plugin name: \.\./\.\./x"):
        find_in_path("../../x", [str(a)])
    with pytest.raises(cni.InvalidPluginNameError, match="no plugin name provided"):
        find_in_path("", [str(a)])
    with pytest.raises(cni.PluginNotFoundError, match="no paths provided"):
        find_in_path("p", [])
    with pytest.raises(cni.PluginNotFoundError) as info:
        find_in_path("d", [str(a), str(b)])
    assert info.value.msg == f'failed to find plugin "d" in path [{a} {b}]'


def test_decode_version_info() -> None:
    info = decode_version_info(b'{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}')
    assert info.supported_versions == ("0.4.0", "1.0.0") and info.supports("1.0.0")
    assert not info.supports("")  # "" means 0.1.0
    assert decode_version_info(b'{"cniVersion":"0.2.0"}').supported_versions == ("0.1.0",
                                                                                  "0.2.0")
    with pytest.raises(cni.CNIError, match="missing field supportedVersions"):
        decode_version_info(b'{"cniVersion":"1.0.0"}')
    with pytest.raises(cni.CNIError, match="missing field cniVersion"):
        decode_version_info(b"{}")


def test_recorded_version_outputs_decode(shared: Path) -> None:
    doc = json.loads((shared / "fixtures/cni/recorded/version-outputs.json").read_text())
    infos = {k: decode_version_info(json.dumps(v).encode()) for k, v in doc["plugins"].items()}
    assert infos["firewall"].supported_versions == ("0.4.0", "1.0.0")
    assert not any(i.supports("1.1.0") for i in infos.values())


# ------------------------------------------------------------------ RawExec with pk-test


def _env(command: str = "ADD") -> dict[str, str]:
    return plugin_env(command, container_id="c1", netns="/x", ifname="eth0",
                      path=[str(PLUGINS)])


def test_rawexec_runs_plugin() -> None:
    out = RawExec().exec_plugin(str(PLUGINS / "pk-test"),
                                b'{"cniVersion":"1.1.0","name":"n","ip":"10.88.0.9/24"}',
                                _env(), 30)
    res = cni.parse_result(out)
    assert res.ips[0].address == "10.88.0.9/24"


def test_rawexec_error_json_becomes_cnierror() -> None:
    stdin = json.dumps({"cniVersion": "1.1.0", "fail": {"ADD": {
        "code": 11, "msg": "try again", "details": "busy"}}}).encode()
    with pytest.raises(cni.CNIError) as info:
        RawExec().exec_plugin(str(PLUGINS / "pk-test"), stdin, _env(), 30)
    assert (info.value.code, info.value.msg, info.value.details) == (11, "try again", "busy")
    stdin = json.dumps({"cniVersion": "1.1.0", "raw": {"ADD": "oops"}, "rc": 3}).encode()
    with pytest.raises(cni.CNIError, match='diagnostic message "oops"'):
        RawExec().exec_plugin(str(PLUGINS / "pk-test"), stdin, _env(), 30)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); look at its state
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


@pytest.mark.timeout(60)
def test_rawexec_timeout_kills_whole_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    stdin = json.dumps({"cniVersion": "1.1.0", "hang": ["ADD"], "grandchild": ["ADD"],
                        "pidfile": str(pidfile)}).encode()
    with pytest.raises(cni.PluginTimeoutError, match="timed out after 3s"):
        RawExec().exec_plugin(str(PLUGINS / "pk-test"), stdin, _env(), 3.0)
    grandchild = int(pidfile.read_text())
    for _ in range(100):  # SIGKILL delivery is asynchronous; wait for the reaper
        if not _alive(grandchild):
            break
        time.sleep(0.05)
    assert not _alive(grandchild)


@pytest.mark.timeout(60)
def test_rawexec_does_not_wait_for_grandchild_holding_stdout(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    stdin = json.dumps({"cniVersion": "1.1.0", "grandchild": ["ADD"], "sleep": 40,
                        "pidfile": str(pidfile), "ip": "10.88.0.3/24"}).encode()
    try:
        out = RawExec().exec_plugin(str(PLUGINS / "pk-test"), stdin, _env(), None)
        assert cni.parse_result(out).ips[0].address == "10.88.0.3/24"
    finally:
        os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_rawexec_retries_text_file_busy(tmp_path: Path) -> None:
    plugin = tmp_path / "pk-test"
    shutil.copy(PLUGINS / "pk-test", plugin)
    fd = os.open(plugin, os.O_WRONLY)  # exec now fails with ETXTBSY
    threading.Timer(0.3, os.close, args=(fd,)).start()
    patient = RawExec(busy_delay=0.1, busy_retries=50)
    out = patient.exec_plugin(str(plugin), b'{"cniVersion":"1.1.0"}', _env(), 30)
    assert cni.parse_result(out).cni_version == "1.1.0"
    fd = os.open(plugin, os.O_WRONLY)
    try:
        with pytest.raises(cni.CNIError, match="Text file busy"):
            RawExec(busy_retries=0).exec_plugin(str(plugin), b"{}", _env(), 30)
    finally:
        os.close(fd)


def test_rawexec_large_stdin_and_missing_binary(tmp_path: Path) -> None:
    big = json.dumps({"cniVersion": "1.1.0", "pad": "x" * 300_000}).encode()
    out = RawExec().exec_plugin(str(PLUGINS / "pk-test"), big, _env(), 30)
    assert cni.parse_result(out).cni_version == "1.1.0"
    with pytest.raises(cni.CNIError, match="failed to execute"):
        RawExec().exec_plugin(str(tmp_path / "nope"), b"{}", _env(), 30)


@pytest.mark.timeout(60)
def test_rawexec_without_pidfd(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Kernels without pidfd_open: the polling fallback gives the same results."""
    monkeypatch.delattr(os, "pidfd_open")
    out = RawExec().exec_plugin(str(PLUGINS / "pk-test"),
                                b'{"cniVersion":"1.1.0","ip":"10.88.0.7/24"}', _env(), 30)
    assert cni.parse_result(out).ips[0].address == "10.88.0.7/24"
    stdin = json.dumps({"cniVersion": "1.1.0", "hang": ["ADD"]}).encode()
    with pytest.raises(cni.PluginTimeoutError):
        RawExec().exec_plugin(str(PLUGINS / "pk-test"), stdin, _env(), 2.0)
    with pytest.raises(cni.CNIError) as info:
        RawExec().exec_plugin(str(PLUGINS / "pk-test"), json.dumps(
            {"cniVersion": "1.1.0", "fail": {"ADD": {"code": 7, "msg": "bad"}}}).encode(),
            _env(), 30)
    assert info.value.code == 7


def test_exit_status_texts() -> None:
    from podkit.cni.invoke import _status
    assert _status(1) == "exit status 1"
    assert _status(-9) == "signal: killed"
    assert _status(-11) == "signal: segmentation fault"
    e = parse_error_output(b"", b"", _status(-9))
    assert e.msg == "netplugin failed with no error message: signal: killed"
