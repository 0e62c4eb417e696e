"""``podkit.node.load``: the node config from defaults, a TOML file, the environment and
overrides, each later one winning; every bad key or value refused naming where it came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from podkit.node import (
    CONFIG_ENV,
    ConfigError,
    NodeConfig,
    dump_config,
    fields,
    load_config,
    reference_table,
)


def _file(tmp_path: Path, text: str, name: str = "podkit.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _load(path: Path, **kw: object) -> NodeConfig:
    kw.setdefault("env", {})
    return load_config(path, **kw)  # type: ignore[arg-type]


def test_an_empty_file_is_every_default(tmp_path: Path) -> None:
    assert _load(_file(tmp_path, "")) == NodeConfig()
    assert NodeConfig().root_dir == "/var/lib/podkit"
    assert NodeConfig().state_dir == "/run/podkit"
    assert NodeConfig().log_dir == "/var/lib/podkit/logs"


def test_a_file_sets_keys_and_its_relative_paths_are_its_own(tmp_path: Path) -> None:
    path = _file(tmp_path, """\
root = "job"
netns_prefix = "ci-"

[runtime]
name = "crun"
supervisor = "in-process"

[network]
name = "ci-net"
conf_dir = "/etc/ci/net.d"
bin_dirs = ["plugins", "/usr/lib/cni"]

[network.builtin]
subnet = "10.99.0.0/24"
masquerade = false

[cdi]
spec_dirs = ["cdi"]
""")
    config = _load(path)
    assert config.root == str(tmp_path / "job")
    assert config.state_dir == str(tmp_path / "job" / "state")  # a root keeps its own state
    assert (config.runtime.name, config.runtime.supervisor) == ("crun", "in-process")
    assert config.network.bin_dirs == (str(tmp_path / "plugins"), "/usr/lib/cni")
    assert config.network.builtin.subnet == "10.99.0.0/24"
    assert config.network.builtin.masquerade is False
    assert config.network.builtin.bridge == "pk0"  # the rest of a table keeps its defaults
    assert config.cdi.spec_dirs == (str(tmp_path / "cdi"),)
    assert config.netns_prefix == "ci-"


def test_an_unknown_key_names_file_line_and_the_key_meant(tmp_path: Path) -> None:
    path = _file(tmp_path, '[network]\nname = "x"\n\nbrige = "pk9"\n')
    with pytest.raises(ConfigError) as err:
        _load(path)
    assert str(err.value) == (f"{path}:4: unknown key 'network.brige' "
                              "(did you mean 'network.builtin.bridge'?)")
    assert (err.value.source, err.value.key, err.value.line) == (str(path), "network.brige", 4)


def test_an_unknown_table_and_a_dotted_key(tmp_path: Path) -> None:
    path = _file(tmp_path, '[netwrok]\nname = "x"\n')
    with pytest.raises(ConfigError, match=r":1: unknown table 'netwrok' \(did you mean "
                                          r"'network'\?\)"):
        _load(path)
    path = _file(tmp_path, 'root = "/r"\nnetwork.builtin.subnt = "10.1.0.0/16"\n')
    with pytest.raises(ConfigError, match=r":2: unknown key 'network.builtin.subnt' \(did you "
                                          r"mean 'network.builtin.subnet'\?\)"):
        _load(path)
    path = _file(tmp_path, 'colour = "blue"\n')
    with pytest.raises(ConfigError, match=r":1: unknown key 'colour'$"):
        _load(path)


@pytest.mark.parametrize(("text", "line", "message"), [
    ('[network]\nmax_networks = "two"\n', 2, "network.max_networks: 'two' is not an integer"),
    ('[network]\nmax_networks = 0\n', 2, "network.max_networks: 0: want 1 or more"),
    ('[runtime]\n\nsupervisor = "systemd"\n', 3,
     "runtime.supervisor: 'systemd': want 'conmon' or 'in-process'"),
    ('[cgroups]\ndriver = "cgroupv2"\n', 2,
     "cgroups.driver: 'cgroupv2': want '' or 'cgroupfs' or 'systemd'"),
    ('[network.builtin]\nsubnet = "10.88.0.0/33"\n', 2, "network.builtin.subnet: '10.88.0.0/33': "
     "not a subnet in CIDR form like 10.88.0.0/16"),
    ('[network.builtin]\nbridge = "a-very-long-bridge-name"\n', 2,
     "network.builtin.bridge: 'a-very-long-bridge-name': not a Linux interface name"),
    ('[network.builtin]\nmasquerade = "yes"\n', 2,
     "network.builtin.masquerade: 'yes' is not true or false"),
    ('[cdi]\nspec_dirs = "/etc/cdi"\n', 2, "cdi.spec_dirs: '/etc/cdi' is not a list of strings"),
    ('[cri]\nstreaming_address = "localhost"\n', 2,
     "cri.streaming_address: 'localhost': want HOST:PORT"),
    ('netns_prefix = "a/b"\n', 1, "netns_prefix: 'a/b': a name prefix, not a path"),
    ('[network]\nbuiltin = 3\n', 2, "unknown key 'network.builtin'"),
])
def test_a_bad_value_names_file_line_key_and_why(tmp_path: Path, text: str, line: int,
                                                  message: str) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        _load(path)
    assert str(err.value).startswith(f"{path}:{line}: {message}"), str(err.value)
    assert err.value.line == line


def test_a_file_that_is_not_toml_names_its_line(tmp_path: Path) -> None:
    path = _file(tmp_path, 'root = "/r"\n[network\nname = "x"\n')
    with pytest.raises(ConfigError, match=rf"{path}: not valid TOML: .*line 2") as err:
        _load(path)
    assert err.value.line == 2


def test_a_named_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"/nope.toml: no such config file"):
        _load(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match=r"/gone.toml: no such config file"):
        load_config(env={CONFIG_ENV: str(tmp_path / "gone.toml")})


def test_precedence_defaults_file_environment_overrides(tmp_path: Path) -> None:
    path = _file(tmp_path, '[network]\nconf_dir = "/file/net.d"\nname = "file"\n'
                           '[runtime]\nname = "crun"\n')
    defaults = {"network.conf_dir": "/etc/cni/net.d", "network.max_networks": 2}
    config = _load(path, defaults=defaults)
    assert (config.network.conf_dir, config.network.max_networks) == ("/file/net.d", 2)
    env = {"PODKIT_NETWORK_NAME": "env", "PODKIT_RUNTIME_NAME": "runc"}
    config = _load(path, env=env, defaults=defaults)
    assert (config.network.name, config.runtime.name) == ("env", "runc")
    config = _load(path, env=env, overrides={"network.name": "flag"})
    assert config.network.name == "flag"
    assert load_config(env={CONFIG_ENV: str(path)}).network.name == "file"


def test_environment_values_are_typed(tmp_path: Path) -> None:
    env = {"PODKIT_CDI_SPEC_DIRS": "/a, /b", "PODKIT_NETWORK_BUILTIN_MASQUERADE": "false",
           "PODKIT_NETWORK_MAX_NETWORKS": "3", "PODKIT_ROOT": "/ci", "PODKIT_STATE": ""}
    config = _load(_file(tmp_path, ""), env=env)
    assert config.cdi.spec_dirs == ("/a", "/b")
    assert config.network.builtin.masquerade is False
    assert config.network.max_networks == 3
    assert config.state_dir == "/ci/state"  # an empty variable is not set
    with pytest.raises(ConfigError, match=r"^\$PODKIT_NETWORK_MAX_NETWORKS: 'x' is not an "
                                          "integer$"):
        _load(_file(tmp_path, ""), env={"PODKIT_NETWORK_MAX_NETWORKS": "x"})


def test_overrides_are_checked_and_named_by_their_option(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--cgroup-driver: 'v2': want"):
        _load(_file(tmp_path, ""), overrides={"cgroups.driver": "v2"},
              origins={"cgroups.driver": "--cgroup-driver"})
    with pytest.raises(ConfigError, match=r"override 'network.nam': not a node config key "
                                          r"\(did you mean 'network.name'\?\)"):
        _load(_file(tmp_path, ""), overrides={"network.nam": "x"})


def test_dump_reads_back_to_the_same_config(tmp_path: Path) -> None:
    config = _load(_file(tmp_path, '[network]\nname = "none"\n[cdi]\nspec_dirs = []\n'),
                   overrides={"root": "/r", "network.builtin.masquerade": False})
    text = dump_config(config)
    assert _load(_file(tmp_path, text, "again.toml")) == config


def test_every_key_has_a_doc_and_a_variable() -> None:
    keys = [f.key for f in fields()]
    assert len(keys) == len(set(keys))
    assert all(f.doc and f.env == "PODKIT_" + f.key.upper().replace(".", "_")
               for f in fields())
    assert {"root", "state", "runtime.name", "runtime.supervisor", "cgroups.driver",
            "cgroups.parent", "network.name", "network.conf_dir", "network.bin_dirs",
            "network.builtin.bridge", "network.builtin.subnet", "network.builtin.masquerade",
            "cdi.spec_dirs", "pause.image", "pause.rootfs", "registry.hosts_dir",
            "registry.auth_file", "cri.streaming_address", "cri.runtime_name",
            "netns_prefix"} <= set(keys)


def test_the_docs_list_every_key_with_its_default() -> None:
    """docs/config.md holds the table the model makes (regenerate it with
    ``python scripts/gen_reference.py``; tests/test_reference.py checks the region too)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "config.md").read_text()
    assert reference_table() in page, "docs/config.md: run python scripts/gen_reference.py"
    for f in fields():
        assert f"| `{f.key}` |" in page, f"{f.key} is missing from docs/config.md"


def test_where_things_go() -> None:
    assert NodeConfig(root="/r").state_dir == "/r/state"
    assert NodeConfig(root="/r", state="/s").state_dir == "/s"
    assert NodeConfig(state="/s").root_dir == "/var/lib/podkit"
    assert NodeConfig(root="/r").images_dir == "/r"
    assert NodeConfig(root="/r", image_root="/i").images_dir == "/i"
    assert NodeConfig(root="/r").log_dir == "/r/logs"
    a = NodeConfig().cgroup_parent("/a/state/pods", "cgroupfs")
    b = NodeConfig().cgroup_parent("/b/state/pods", "cgroupfs")
    assert a.startswith("/podkit/") and b.startswith("/podkit/") and a != b
    assert a == NodeConfig().cgroup_parent("/a/state/pods", "cgroupfs")  # the same next time
    assert NodeConfig().cgroup_parent("/a/state/pods", "systemd") == ""
    configured = NodeConfig(cgroups=NodeConfig().cgroups.__class__(parent="/ci"))
    assert configured.cgroup_parent("/a", "cgroupfs") == "/ci"
