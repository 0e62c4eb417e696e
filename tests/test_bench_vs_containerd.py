"""The pure parts of benchmarks/bench_vs_containerd.py: containerd's config.toml, the CNI
conflist, the cleanup finders (mounts, iptables chains), the goals and the table, the CPU
readings and the warm medians; the CPU cgroup against the real cgroup tree (integration). No
containerd needed; the benchmark itself runs under ``make bench``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

from containerd import cpu, floors, instance, kubelet, load, report  # noqa: E402
from containerd.images import BIG, hosts_dir, write_layout  # noqa: E402

CRI = "io.containerd.grpc.v1.cri"


def _config(tmp_path: Path, **kw: object) -> dict[str, object]:
    text = instance.config_toml(tmp_path, sandbox_image="localhost/pk-vs/pause:1",
                                cni_conf_dir=tmp_path / "net.d", **kw)  # type: ignore[arg-type]
    return tomllib.loads(text)


def test_config_toml_keeps_everything_under_the_temp_dir(tmp_path: Path) -> None:
    cfg = _config(tmp_path, registry_config_dir=tmp_path / "certs.d")
    assert cfg["version"] == 2
    assert cfg["root"] == str(tmp_path / "root")
    assert cfg["state"] == str(tmp_path / "state")
    assert cfg["grpc"] == {"address": str(tmp_path / "containerd.sock")}
    assert cfg["ttrpc"] == {"address": str(tmp_path / "containerd.sock.ttrpc")}
    assert cfg["debug"]["address"] == "" and cfg["metrics"]["address"] == ""  # type: ignore[index]
    cri = cfg["plugins"][CRI]  # type: ignore[index]
    assert cri["sandbox_image"] == "localhost/pk-vs/pause:1"
    assert cri["restrict_oom_score_adj"] is True
    assert cri["containerd"]["snapshotter"] == "overlayfs"
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["runtime_type"] == "io.containerd.runc.v2"
    assert runc["options"] == {"SystemdCgroup": False, "Root": str(tmp_path / "runc")}
    assert cri["cni"] == {"bin_dir": "/usr/lib/cni", "conf_dir": str(tmp_path / "net.d"),
                          "max_conf_num": 1}
    assert cri["registry"] == {"config_path": str(tmp_path / "certs.d")}
    assert "io.containerd.internal.v1.opt" in cfg["disabled_plugins"]  # type: ignore[operator]
    # the tasks service needs the v1 runtime registered: disabling it disables the CRI plugin
    assert "io.containerd.runtime.v1.linux" not in cfg["disabled_plugins"]  # type: ignore[operator]


def test_config_toml_without_a_registry_dir_has_no_registry_table(tmp_path: Path) -> None:
    assert "registry" not in _config(tmp_path)["plugins"][CRI]  # type: ignore[index]


@pytest.mark.parametrize("image", ["", 'bad"quote', "two\nlines"])
def test_config_toml_refuses_an_image_it_cannot_write(tmp_path: Path, image: str) -> None:
    with pytest.raises(ValueError, match="sandbox_image") as err:
        instance.config_toml(tmp_path, sandbox_image=image, cni_conf_dir=tmp_path)
    assert repr(image) in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_conflist_is_bridge_without_masquerade_and_portmap(tmp_path: Path) -> None:
    conf = instance.conflist("pk-vs-x", "pkvsx", "10.93.0.0/16", tmp_path / "ipam")
    path = instance.write_conflist(tmp_path / "net.d", conf)
    loaded = json.loads(path.read_text())
    assert path.name == "10-pk-vs-x.conflist"
    assert [p["type"] for p in loaded["plugins"]] == ["bridge", "portmap"]
    bridge = loaded["plugins"][0]
    assert bridge["bridge"] == "pkvsx" and bridge["ipMasq"] is False
    assert bridge["ipam"]["dataDir"] == str(tmp_path / "ipam")
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.93.0.0/16"}]]


@pytest.mark.parametrize("bridge", ["", "much-too-long-bridge", "Bad Name"])
def test_conflist_refuses_a_bad_bridge_name(tmp_path: Path, bridge: str) -> None:
    with pytest.raises(ValueError, match="bridge name") as err:
        instance.conflist("n", bridge, "10.93.0.0/16", tmp_path)
    assert repr(bridge) in str(err.value)


def test_mounts_under_finds_the_dir_and_below_deepest_first() -> None:
    info = "\n".join([
        "22 1 0:21 / / rw - ext4 /dev/vda rw",
        "30 22 0:40 / /tmp/pk-vs-1/root rw - tmpfs x rw",
        "31 30 0:41 / /tmp/pk-vs-1/root/a/rootfs rw - overlay overlay rw",
        "32 22 0:42 / /tmp/pk-vs-10 rw - tmpfs x rw",
        "33 22 0:43 / /tmp/pk-vs-1/with\\040space rw - tmpfs x rw",
    ])
    assert instance.mounts_under(info, "/tmp/pk-vs-1/") == [
        "/tmp/pk-vs-1/root/a/rootfs", "/tmp/pk-vs-1/root", "/tmp/pk-vs-1/with space"]
    assert instance.mounts_under(info, "/elsewhere") == []


def test_cni_chains_finds_only_the_chains_of_one_network() -> None:
    save = "\n".join([
        "*nat",
        ":CNI-HOSTPORT-DNAT - [0:0]",
        ":CNI-DN-aaa - [0:0]",
        ":CNI-DN-bbb - [0:0]",
        ":CNI-0123 - [0:0]",
        '-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"pk-vs-c\\" id: '
        '\\"x\\"" -m multiport --dports 80 -j CNI-DN-aaa',
        '-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"other\\" id: '
        '\\"y\\"" -m multiport --dports 80 -j CNI-DN-bbb',
        '-A POSTROUTING -s 10.92.0.5/32 -m comment --comment "name: \\"pk-vs-c\\" id: '
        '\\"x\\"" -j CNI-0123',
        '-A PREROUTING -m comment --comment "name: \\"pk-vs-c\\"" -j CNI-HOSTPORT-DNAT',
        "COMMIT",
    ])
    assert instance.cni_chains(save, "pk-vs-c") == ["CNI-DN-aaa", "CNI-0123"]
    assert instance.cni_chains(save, "pk-vs") == []


def _row(call: str, podkit: list[float], other: list[float], **kw: str) -> report.Row:
    return report.Row(call, podkit, other, **kw)


def test_goals_cover_every_measure_of_the_issues() -> None:
    for call in ("RunPodSandbox", "CreateContainer+StartContainer", "StopPodSandbox",
                 "RemovePodSandbox", "ExecSync", "ContainerStatus", "ListContainers",
                 "ListPodSandbox", "ListContainerStats", "create pods, concurrency 10"):
        assert report.GOALS[call] == 0.75
    assert report.GOALS["PullImage"] == 1.0
    assert report.GOALS["server RSS (10 pods)"] == report.GOALS["server RSS (100 pods)"] == 1.0
    assert report.GOALS["per-pod helper RSS"] == 0.35
    assert report.GOALS["restart: first full List"] == 1.0
    # issue 22: the physical limit, bare runc in the same rounds
    assert report.GOALS["CreateContainer+StartContainer vs floor runc create+start"] == 1.15
    assert report.GOALS["ExecSync vs floor runc exec"] == 1.15
    # measured beside the goal rows, no goal of their own
    for variant in (" (loaded)", " (minimal pod)"):
        assert report.GOALS["RemovePodSandbox" + variant] is None


def test_a_row_named_at_run_time_takes_its_goal_given() -> None:
    assert _row("server RSS (7 pods)", [1.0], [1.0]).goal is None
    assert report.Row("server RSS (7 pods)", [1.1], [1.0], goal=1.0).met == "MISS"


def test_a_row_meets_its_goal_at_the_limit_and_misses_above() -> None:
    assert _row("RunPodSandbox", [0.075], [0.1]).met == "yes"
    miss = _row("RunPodSandbox", [0.08, 0.076, 0.09], [0.1])
    assert miss.ratio == pytest.approx(0.8)
    assert miss.met == "MISS"
    assert _row("ContainerStats", [5.0], [1.0]).met == ""  # measured, no goal


def test_p90_and_median() -> None:
    values = [float(v) for v in range(1, 11)]
    assert report.median(values) == 5.5
    assert report.p90(values) == pytest.approx(9.1)
    assert report.p90([3.0]) == 3.0
    with pytest.raises(ValueError, match="no samples"):
        report.median([])


def test_render_prints_one_table_and_names_the_misses() -> None:
    rows = [_row("RunPodSandbox", [0.050, 0.060], [0.100, 0.100]),
            _row("server RSS (10 pods)", [75.0], [50.0], unit="MB"),
            _row("PullImage vs floor fetch+sha256", [0.2], [0.1], second="floor"),
            _row("restart: first full List", [0.5], [1.0], unit="s")]
    text = report.render(rows, "title")
    lines = text.splitlines()
    assert lines[0] == "title"
    assert lines[1].split("|")[1:-1] == [
        " call                            ", " podkit median / p90 ",
        " containerd median / p90 ", " ratio ", " goal    ", " met  "]
    assert "| 55.0 / 59.0 ms " in lines[3] and "| 0.55 " in lines[3] and "| yes " in lines[3]
    assert "| 75.0 MB " in lines[4] and "| 1.50 " in lines[4] and "| MISS |" in lines[4]
    assert "| 2.00 " in lines[5] and "| <= 1.15 " in lines[5]
    assert "| 0.50 s " in lines[6]
    assert lines[-1] == "goals missed: server RSS (10 pods), PullImage vs floor fetch+sha256"
    assert len({len(line) for line in lines[1:-1]}) == 1  # one width per column
    assert report.render(rows[:1], "t").splitlines()[-1] == "every goal met"


def test_as_json_carries_the_numbers() -> None:
    [out] = report.as_json([_row("ExecSync", [0.01], [0.02])])
    assert out["ratio"] == 0.5 and out["goal"] == 0.75 and out["met"] == "yes"
    assert out["other"] == "containerd" and out["podkit_p90"] == 0.01


@pytest.mark.parametrize(("raw", "why"), [("x", "not an integer"), ("0", "at least 1")])
def test_env_int_names_the_variable_and_value(monkeypatch: pytest.MonkeyPatch, raw: str,
                                             why: str) -> None:
    monkeypatch.setenv("BENCH_ROUNDS", raw)
    with pytest.raises(ValueError, match=why) as err:
        report.env_int("BENCH_ROUNDS", 20)
    assert f"$BENCH_ROUNDS={raw!r}" in str(err.value)


def test_env_int_default_and_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCH_SCALE_PODS", raising=False)
    assert report.env_int("BENCH_SCALE_PODS", 100) == 100
    monkeypatch.setenv("BENCH_SCALE_PODS", "7")
    assert report.env_int("BENCH_SCALE_PODS", 100) == 7


def test_layouts_name_the_image_for_both_importers(tmp_path: Path) -> None:
    layout = write_layout(tmp_path / "l", [b"layer"], {"Cmd": ["sh"]}, "localhost/x/y:1")
    [man] = json.loads((layout / "index.json").read_text())["manifests"]
    assert man["annotations"]["io.containerd.image.name"] == "localhost/x/y:1"
    blob = json.loads((layout / "blobs" / "sha256" / man["digest"][7:]).read_text())
    assert len(blob["layers"]) == 1 and ":" in BIG


def test_hosts_dir_serves_the_registry_over_plain_http(tmp_path: Path) -> None:
    hosts = hosts_dir(tmp_path, "127.0.0.1:5999")
    text = (hosts / "127.0.0.1:5999" / "hosts.toml").read_text()
    assert tomllib.loads(text) == {"server": "http://127.0.0.1:5999", "host": {
        "http://127.0.0.1:5999": {"capabilities": ["pull", "resolve"]}}}


@pytest.mark.integration
def test_remove_cni_chains_deletes_the_networks_chains_and_the_jumps_to_them() -> None:
    """Real iptables (in scripts/isolated's namespace): the chains portmap and the bridge
    plugin would make for two networks; only the named network's go."""
    from support import require_binary, require_isolated

    require_isolated()
    require_binary("iptables")
    ipt = ["iptables", "-w", "-t", "nat"]

    def rules() -> str:
        return subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True,
                              check=True).stdout

    made = {"CNI-DN-pkvstest": "pk-vs-test", "CNI-DN-pkvsother": "pk-vs-other"}
    try:
        for chain, net in made.items():
            subprocess.run([*ipt, "-N", chain], check=True)
            subprocess.run([*ipt, "-A", "PREROUTING", "-m", "comment", "--comment",
                            f'dnat name: "{net}" id: "x"', "-j", chain], check=True)
        assert instance.remove_cni_chains("pk-vs-test") == ["CNI-DN-pkvstest"]
        after = rules()
        assert "CNI-DN-pkvstest" not in after
        assert ":CNI-DN-pkvsother" in after and "-j CNI-DN-pkvsother" in after
    finally:
        instance.remove_cni_chains("pk-vs-other")
    assert "CNI-DN-pkvs" not in rules()


@pytest.mark.integration
def test_unmount_under_lazily_unmounts_nested_mounts(tmp_path: Path) -> None:
    """Real mounts (scripts/isolated's mount namespace): a tmpfs with an overlay inside."""
    from support import require_isolated

    require_isolated()
    outer = tmp_path / "base" / "root"
    outer.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "pk-vs-test", str(outer)], check=True)
    inner = outer / "a"
    inner.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "pk-vs-test", str(inner)], check=True)
    mountinfo = Path("/proc/self/mountinfo")
    assert len(instance.mounts_under(mountinfo.read_text(), str(tmp_path / "base"))) == 2
    instance.unmount_under(tmp_path / "base")
    assert instance.mounts_under(mountinfo.read_text(), str(tmp_path)) == []


def _recorded(bench: Any) -> Any:
    rec = bench.Recorder()
    warm = tuple(bench.warm_name(c) for c in bench.WARM_CALLS)
    calls = bench.ROUND_CALLS + bench.HELD_CALLS + bench.SCALE_CALLS + bench.CPU_CALLS + warm
    for side in ("podkit", "containerd", "floor"):
        for call in calls:
            for v in (0.01, 0.03):
                rec.add(side, call, v)
    rec.times[("podkit", "RemovePodSandbox")] = [0.05, 0.07]
    return rec


def test_build_rows_adds_stop_plus_remove_per_round_and_the_memory_rows() -> None:
    import bench_vs_containerd as bench

    rec = _recorded(bench)
    mem = {side: {"server RSS, idle (no pod yet)": 50.0, "server RSS (10 pods)": 60.0,
                  "server RSS (100 pods)": 70.0, "per-pod helper RSS": 4.0,
                  "server open fds": 15.0, "helpers": 200.0}
           for side in ("podkit", "containerd")}
    mem["containerd"]["server RSS (10 pods)"] = 50.0
    mem["floor"] = {"server RSS, idle (no pod yet)": 40.0}
    rows = {r.call: r for r in bench.build_rows(rec, mem, 100)}
    assert rows["StopPodSandbox+RemovePodSandbox"].podkit == pytest.approx([0.06, 0.10])
    assert rows["StopPodSandbox+RemovePodSandbox"].containerd == pytest.approx([0.02, 0.06])
    for variant in (bench.LOADED, bench.MINIMAL):  # the same rows, beside the goal rows
        assert rows["RemovePodSandbox" + variant].goal is None
        assert rows["StopPodSandbox+RemovePodSandbox" + variant].podkit == pytest.approx(
            [0.02, 0.06])
    assert rows["PullImage vs floor fetch+sha256"].second == "floor"
    assert rows[bench.EXEC_FLOOR].second == "floor" and rows[bench.EXEC_FLOOR].goal == 1.15
    assert rows[bench.CREATE_FLOOR].second == "floor" and rows[bench.CREATE_FLOOR].goal == 1.15
    assert rows["server RSS (10 pods)"].ratio == 1.2 and rows["server RSS (10 pods)"].met == "MISS"
    assert rows["server RSS (100 pods)"].ratio == 1.0 and rows["server RSS (100 pods)"].met == "yes"
    floor = rows[bench.RSS_FLOOR]
    assert (floor.podkit, floor.containerd, floor.second) == ([60.0], [40.0], "floor")
    assert rows[bench.RSS_IDLE].unit == "MB" and rows[bench.RSS_IDLE].goal is None
    assert set(rows) <= set(report.GOALS)  # every row has a goal entry (None: no goal)
    warm = [bench.warm_name(c) for c in bench.WARM_CALLS]
    assert [rows[c].unit for c in bench.CPU_CALLS] == ["ms", "ms", "%"]
    assert {rows[c].unit for c in warm} == {"ms"} and len(warm) == 4
    assert all(rows[c].goal is None for c in (*warm, *bench.CPU_CALLS))
    names = list(rows)
    assert names.index(warm[0]) > names.index("Version (no-op: the gRPC floor)")
    # the loaded rows come right after the quiet ones
    assert names[:15] == [c + v for v in bench.VARIANTS
                          for c in (*bench.POD_CALLS, "StopPodSandbox+RemovePodSandbox")]


def test_build_rows_names_the_scale_rss_row_by_its_pod_count() -> None:
    import bench_vs_containerd as bench

    mem = {side: {"server RSS, idle (no pod yet)": 50.0, "server RSS (3 pods)": 60.0,
                  "per-pod helper RSS": 4.0, "server open fds": 15.0}
           for side in ("podkit", "containerd")}
    mem["floor"] = {"server RSS, idle (no pod yet)": 40.0}
    rows = {r.call: r for r in bench.build_rows(_recorded(bench), mem, 3)}
    assert rows["server RSS (3 pods)"].goal == 1.0  # FEW_PODS capped at the scale


def test_make_cost_sums_several_makes() -> None:
    import bench_vs_containerd as bench

    made = [bench.Made(2.0, [("p", "c")] * 10, 1.0, 0.2, (90, 100)),
            bench.Made(6.0, [("p", "c")] * 30, 3.0, 0.6, (270, 300))]
    cost = bench.make_cost(made)
    assert cost[bench.SCALE_CALLS[0]] == 8.0
    assert cost[bench.CPU_CALLS[0]] == pytest.approx(0.1)  # 4 s over 40 pods
    assert cost[bench.CPU_CALLS[1]] == pytest.approx(0.02)
    assert cost[bench.CPU_CALLS[2]] == pytest.approx(90.0)


# -- CPU accounting (containerd/cpu.py) and the warm rows ---------------------------------------


def test_cpu_stat_seconds_reads_usage_usec() -> None:
    assert cpu.cpu_stat_seconds("usage_usec 2500000\nuser_usec 1\nsystem_usec 2\n") == 2.5
    with pytest.raises(ValueError, match="usage_usec"):
        cpu.cpu_stat_seconds("user_usec 1\n")


def test_process_seconds_sums_utime_and_stime_past_an_odd_command_name() -> None:
    rest = " ".join(["S", *["0"] * 10, "250", "150", "7", "9", *["0"] * 30])
    assert cpu.process_seconds(f"42 (a b) c)) {rest}", ticks=100) == 4.0
    own = cpu.process_seconds(Path("/proc/self/stat").read_text())
    assert 0 < own < 3600


def test_proc_stat_busy_and_the_busy_fraction() -> None:
    text = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8\nintr 5\n"
    assert cpu.proc_stat_busy(text) == (150, 1000)
    assert cpu.busy_fraction((150, 1000), (450, 2000)) == 0.3
    assert cpu.busy_fraction((1, 1), (1, 1)) == 0.0
    with pytest.raises(ValueError, match="no cpu line"):
        cpu.proc_stat_busy("intr 5\n")
    busy, total = cpu.proc_stat_busy(Path("/proc/stat").read_text())
    assert 0 < busy < total


def test_enter_argv_writes_the_pid_that_then_runs_the_program(tmp_path: Path) -> None:
    procs = tmp_path / "cgroup.procs"
    out = subprocess.run(cpu.enter_argv(procs, ["sh", "-c", "echo $$"]), capture_output=True,
                         text=True, check=True)
    assert procs.read_text().strip() == out.stdout.strip()
    gone = subprocess.run(cpu.enter_argv(tmp_path / "no" / "cgroup.procs", ["true"]),
                          capture_output=True, check=False)
    assert gone.returncode != 0  # no group, no program


def test_warm_median_times_each_call() -> None:
    ticks = iter([0.0, 1.0, 1.0, 4.0, 4.0, 6.0])
    made: list[int] = []
    assert report.warm_median(lambda: made.append(1), 3, clock=lambda: next(ticks)) == 2.0
    assert len(made) == 3
    with pytest.raises(ValueError, match="at least 1"):
        report.warm_median(lambda: None, 0)


def test_small_times_get_two_decimals() -> None:
    line = report.render([_row("Version, warm (20 back-to-back)", [0.00055], [0.00061])],
                         "t").splitlines()[3]
    assert "| 0.55 / 0.55 ms " in line and "| 0.61 / 0.61 ms " in line and "| 0.90 " in line


@pytest.mark.integration
def test_cpu_group_counts_what_runs_in_it_and_goes_away() -> None:
    from support import require_isolated, require_root

    require_root()
    require_isolated()
    group = cpu.CpuGroup(f"pk-vs-test-{os.getpid()}")
    try:
        assert group.seconds() == 0.0
        spin = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"
        proc = subprocess.Popen(cpu.enter_argv(group.procs, ["sh", "-c", spin]))
        assert proc.wait(60) == 0
        used = group.seconds()
        assert 0.05 < used < 60
        assert group.procs.read_text() == ""  # the process has gone with its time counted
        sleeper = subprocess.Popen(cpu.enter_argv(group.procs, ["sleep", "30"]))
        for _ in range(50):
            if str(sleeper.pid) in group.procs.read_text().split():
                break
            time.sleep(0.1)
        assert str(sleeper.pid) in group.procs.read_text().split()
        group.remove()  # moves the sleeper out first
        assert not group.path.exists()
        sleeper.kill()
        sleeper.wait()
    finally:
        group.remove()
    assert not group.path.exists()


def test_a_floor_container_gets_a_sibling_cgroup_and_no_terminal() -> None:
    assert floors.floor_cgroups_path("/podkit/pod1/ctr1", "floor-a") == "/podkit/pod1/floor-a"
    assert floors.floor_cgroups_path("/ctr1", "floor-a") == "/floor-a"
    assert (floors.floor_cgroups_path("system.slice:cri-podkit:ctr1", "floor-a")
            == "system.slice:cri-podkit:floor-a")
    spec = {"process": {"terminal": True, "args": ["sleep"]},
            "linux": {"cgroupsPath": "/podkit/p/c"}}
    out = floors.floor_spec(spec, "floor-b")
    assert out["linux"]["cgroupsPath"] == "/podkit/p/floor-b"
    assert out["process"] == {"terminal": False, "args": ["sleep"]}
    assert spec["linux"]["cgroupsPath"] == "/podkit/p/c"  # the original is untouched


# -- kubelet's configs (containerd/kubelet.py) -------------------------------------------------


def _pod(tmp_path: Path) -> kubelet.KubeletPod:
    return kubelet.KubeletPod(name="web-7d4b9c8f6-x2k4q",
                              uid="0f1e2d3c-aaaa-bbbb-cccc-000000000001", host_port=30001,
                              log_root=tmp_path / "logs",
                              pod_root=tmp_path / "pods", seen="2026-01-01T00:00:00.1Z",
                              token_volume="kube-api-access-abcde", termination_log="0a1b2c3d")


V1 = kubelet.HostFacts(cgroup_v2=False, swap_controller=True, hugepage_sizes=("1GB", "2MB"),
                       memory_capacity=16 << 30)
V2 = kubelet.HostFacts(cgroup_v2=True, memory_capacity=16 << 30)


def test_kubelet_arithmetic() -> None:
    assert kubelet.milli_cpu_to_shares(100) == 102
    assert kubelet.milli_cpu_to_shares(0) == kubelet.milli_cpu_to_shares(1) == 2
    assert kubelet.milli_cpu_to_shares(10**9) == 262144
    assert kubelet.milli_cpu_to_quota(500) == 50000
    assert kubelet.milli_cpu_to_quota(0) == 0 and kubelet.milli_cpu_to_quota(1) == 1000
    assert kubelet.burstable_oom_score_adj(64 << 20, 16 << 30) == 997  # 1000 - 1000*64Mi/16Gi
    assert kubelet.burstable_oom_score_adj(0, 16 << 30) == 999  # never BestEffort's 1000
    assert kubelet.burstable_oom_score_adj(16 << 30, 16 << 30) == 3  # above Guaranteed's
    assert kubelet.hugepage_size_name("hugepages-2048kB") == "2MB"
    assert kubelet.hugepage_size_name("hugepages-1048576kB") == "1GB"
    assert kubelet.hugepage_size_name("hugepages-64kB") == "64KB"
    with pytest.raises(ValueError, match="'hugepages-2M'"):
        kubelet.hugepage_size_name("hugepages-2M")
    h = kubelet.container_hash({"name": "web"})
    assert h == kubelet.container_hash({"name": "web"}) != kubelet.container_hash({"name": "x"})
    assert int(h, 16) < 2**32


def test_kubelet_sandbox_config_has_every_field_kubelet_sets(tmp_path: Path) -> None:
    from podkit.cri import api_pb2 as pb

    pod = _pod(tmp_path)
    cfg = kubelet.sandbox_config(pod, V1)
    assert (cfg.metadata.name, cfg.metadata.namespace, cfg.metadata.uid, cfg.metadata.attempt) \
        == (pod.name, "default", pod.uid, 0)
    assert cfg.hostname == pod.name
    assert cfg.log_directory == str(tmp_path / "logs" / f"default_{pod.name}_{pod.uid}")
    assert list(cfg.dns_config.servers) == ["10.96.0.10"]
    assert list(cfg.dns_config.searches) == ["default.svc.cluster.local", "svc.cluster.local",
                                             "cluster.local"]
    assert list(cfg.dns_config.options) == ["ndots:5"]
    [port] = cfg.port_mappings
    assert (port.protocol, port.container_port, port.host_port, port.host_ip) \
        == (pb.TCP, 80, 30001, "")
    assert dict(cfg.labels) == {
        "app": "web", "pod-template-hash": "7d4b9c8f6", "io.kubernetes.pod.name": pod.name,
        "io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.uid": pod.uid}
    assert dict(cfg.annotations) == {"kubernetes.io/config.seen": "2026-01-01T00:00:00.1Z",
                                     "kubernetes.io/config.source": "api"}
    linux = cfg.linux
    assert linux.cgroup_parent == f"/kubepods/burstable/pod{pod.uid}"
    sc = linux.security_context
    assert sc.HasField("seccomp") and sc.seccomp.profile_type == \
        pb.SecurityProfile.ProfileType.RuntimeDefault
    assert not sc.privileged and not sc.HasField("run_as_user")
    ns = sc.namespace_options
    assert (ns.network, ns.pid, ns.ipc, ns.userns_options.mode) == \
        (pb.POD, pb.CONTAINER, pb.POD, pb.NODE)
    assert linux.HasField("overhead") and linux.overhead.ByteSize() == 0
    res = linux.resources
    assert (res.cpu_period, res.cpu_quota, res.cpu_shares, res.memory_limit_in_bytes) == \
        (100000, 50000, 102, 128 << 20)
    assert res.oom_score_adj == 0 and not res.hugepage_limits  # the pod's, not a container's
    assert dict(linux.sysctls) == {}


def test_kubelet_container_config_has_every_field_kubelet_sets(tmp_path: Path) -> None:
    from podkit.cri import api_pb2 as pb

    pod = _pod(tmp_path)
    cfg = kubelet.container_config(pod, V1, "sha256:" + "a" * 64, "localhost/pk-vs/busybox:1")
    assert (cfg.metadata.name, cfg.metadata.attempt) == ("web", 0)
    assert (cfg.image.image, cfg.image.user_specified_image) == \
        ("sha256:" + "a" * 64, "localhost/pk-vs/busybox:1")
    assert not cfg.command and not cfg.args and not cfg.working_dir  # the image's
    assert cfg.log_path == "web/0.log"
    assert not (cfg.stdin or cfg.stdin_once or cfg.tty)
    envs = {e.key: e.value.decode() for e in cfg.envs}
    assert envs["APP_MODE"] == "bench"
    assert envs["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert envs["KUBERNETES_PORT_443_TCP"] == "tcp://10.96.0.1:443"
    assert len(envs) == 9
    mounts = [(m.container_path, m.host_path, m.readonly, m.selinux_relabel, m.propagation)
              for m in cfg.mounts]
    assert mounts == [
        ("/var/run/secrets/kubernetes.io/serviceaccount",
         str(pod.pod_dir / "volumes" / "kubernetes.io~projected" / "kube-api-access-abcde"),
         True, False, pb.PROPAGATION_PRIVATE),
        ("/etc/hosts", str(pod.pod_dir / "etc-hosts"), False, False, pb.PROPAGATION_PRIVATE),
        ("/dev/termination-log", str(pod.pod_dir / "containers" / "web" / "0a1b2c3d"), False,
         False, pb.PROPAGATION_PRIVATE)]
    assert dict(cfg.labels) == {
        "io.kubernetes.pod.name": pod.name, "io.kubernetes.pod.namespace": "default",
        "io.kubernetes.pod.uid": pod.uid, "io.kubernetes.container.name": "web"}
    ann = dict(cfg.annotations)
    assert int(ann.pop("io.kubernetes.container.hash"), 16) >= 0
    assert json.loads(ann.pop("io.kubernetes.container.ports")) == [
        {"hostPort": 30001, "containerPort": 80, "protocol": "TCP"}]
    assert ann == {"io.kubernetes.container.restartCount": "0",
                   "io.kubernetes.container.terminationMessagePath": "/dev/termination-log",
                   "io.kubernetes.container.terminationMessagePolicy": "File",
                   "io.kubernetes.pod.terminationGracePeriod": "30"}
    res = cfg.linux.resources
    assert (res.cpu_period, res.cpu_quota, res.cpu_shares, res.memory_limit_in_bytes) == \
        (100000, 50000, 102, 128 << 20)
    assert res.oom_score_adj == 997
    assert [(h.page_size, h.limit) for h in res.hugepage_limits] == [("1GB", 0), ("2MB", 0)]
    assert res.memory_swap_limit_in_bytes == 128 << 20  # v1 NoSwap: swap limit = memory limit
    sc = cfg.linux.security_context
    assert sc.HasField("run_as_user") and sc.run_as_user.value == 0
    assert sc.seccomp.profile_type == pb.SecurityProfile.ProfileType.RuntimeDefault
    assert not sc.no_new_privs and not sc.privileged and not sc.readonly_rootfs
    assert list(sc.masked_paths) == list(kubelet.MASKED_PATHS)
    assert "/proc/kcore" in sc.masked_paths and "/sys/devices/virtual/powercap" in sc.masked_paths
    assert list(sc.readonly_paths) == ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                                       "/proc/sysrq-trigger"]
    ns = sc.namespace_options
    assert (ns.network, ns.pid, ns.ipc, ns.userns_options.mode) == \
        (pb.POD, pb.CONTAINER, pb.POD, pb.NODE)


def test_kubelet_configs_on_cgroup_v2_use_unified_keys(tmp_path: Path) -> None:
    pod = _pod(tmp_path)
    ctr = kubelet.container_config(pod, V2, "sha256:" + "a" * 64, "busybox").linux.resources
    assert dict(ctr.unified) == {"memory.oom.group": "1", "memory.swap.max": "0"}
    assert ctr.memory_swap_limit_in_bytes == 0 and not ctr.hugepage_limits
    sandbox = kubelet.sandbox_config(pod, V2).linux.resources
    assert dict(sandbox.unified) == {"memory.oom.group": "1"}
    no_swap = kubelet.HostFacts(swap_controller=False)
    assert kubelet.container_config(pod, no_swap, "x", "x").linux.resources \
        .memory_swap_limit_in_bytes == 0


def test_host_facts_read_the_node(tmp_path: Path) -> None:
    cg = tmp_path / "cg"
    (cg / "memory").mkdir(parents=True)
    (cg / "memory" / "memory.memsw.limit_in_bytes").write_text("max")
    pages = tmp_path / "hugepages"
    for d in ("hugepages-2048kB", "hugepages-1048576kB"):
        (pages / d).mkdir(parents=True)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemFree: 1 kB\nMemTotal:  2048 kB\n")
    facts = kubelet.host_facts(cg, pages, meminfo)
    assert facts == kubelet.HostFacts(cgroup_v2=False, swap_controller=True, hugepage_sizes=(),
                                      memory_capacity=2 << 20)  # no hugetlb controller
    (cg / "hugetlb").mkdir()
    assert kubelet.host_facts(cg, pages, meminfo).hugepage_sizes == ("1GB", "2MB")
    v2 = tmp_path / "cg2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu memory pids\n")
    assert kubelet.host_facts(v2, pages, meminfo) == kubelet.HostFacts(
        cgroup_v2=True, swap_controller=True, hugepage_sizes=(), memory_capacity=2 << 20)
    assert kubelet.host_facts().memory_capacity > 0  # this machine


def test_kubelet_node_makes_the_pod_files_and_releases_them(tmp_path: Path) -> None:
    cg = tmp_path / "cgroup"
    for hierarchy in ("cpu", "memory"):
        (cg / hierarchy).mkdir(parents=True)
    node = kubelet.KubeletNode(tmp_path / "node", V1, cgroup_root=cg)
    a, b = node.new_pod(), node.new_pod()
    assert (a.host_port, b.host_port) == (30000, 30001) and a.uid != b.uid
    assert a.name.startswith("web-7d4b9c8f6-") and len(a.name) == len("web-7d4b9c8f6-") + 5
    assert (a.log_directory / "web").is_dir()
    assert oct(a.log_directory.stat().st_mode & 0o777) == oct(0o755)
    assert oct(a.termination_log_path.stat().st_mode & 0o777) == oct(0o666)
    assert a.etc_hosts.read_text().startswith("# Kubernetes-managed hosts file.")
    assert {p.name for p in a.token_dir.iterdir()} == {"token", "namespace", "ca.crt"}
    for hierarchy in ("cpu", "memory"):  # what runc would have made under the parent
        (cg / hierarchy / a.cgroup_parent.strip("/") / "ctr").mkdir(parents=True)
    node.release(a)
    assert not a.log_directory.exists() and not a.pod_dir.exists()
    assert not (cg / "memory" / a.cgroup_parent.strip("/")).exists()
    assert (cg / "memory" / "kubepods" / "burstable").is_dir()
    assert set(node.pods) == {b.uid}
    node.cleanup()
    assert not b.pod_dir.exists() and node.pods == {}
    assert not (cg / "cpu" / "kubepods").exists() and (cg / "cpu").is_dir()


# -- the burner and the RSS floor --------------------------------------------------------------


def test_burner_argv_pins_itself() -> None:
    argv = load.burner_argv(1, python="/usr/bin/python3")
    assert argv[:3] == ["/usr/bin/python3", "-S", "-c"] and argv[-1] == "1"
    assert "sched_setaffinity" in argv[3]
    with pytest.raises(ValueError, match="cpu -1"):
        load.burner_argv(-1)


def test_burner_spins_on_each_cpu_and_stops() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    with load.Burner() as burner:
        procs = list(burner.procs)
        assert len(procs) == len(cpus)
        time.sleep(0.3)
        for proc, cpu_no in zip(procs, cpus, strict=True):
            status = Path(f"/proc/{proc.pid}/status").read_text()
            assert f"Cpus_allowed_list:\t{cpu_no}\n" in status
            assert proc.poll() is None
    assert all(p.returncode is not None for p in procs) and burner.procs == []


def test_the_rss_floor_server_answers_version(tmp_path: Path) -> None:
    import bench_vs_containerd as bench

    rss = bench.floor_rss(tmp_path, dict(os.environ), calls=3)
    assert 10 < rss < 200
    assert not (tmp_path / "floor.sock").exists()
