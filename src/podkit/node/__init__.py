"""One node configuration, and the builders every frontend assembles itself with.

``NodeConfig`` holds everything a node needs (directories, runtime, supervisor, cgroups, the
pod network, CDI spec dirs, the pause, registries, the CRI server); :func:`load_config` reads
it from ``/etc/podkit/podkit.toml`` (or a file given), the environment and overrides.
:func:`build_manager` makes the ``SandboxManager`` of a config, the one way ``podkit pod``,
``podkit kube`` and ``podkit cri serve`` (through ``podkit.cri.build_service``) get theirs;
:func:`build_runtime` the OCI runtime ``podkit run`` drives. docs/config.md lists every key.

>>> from podkit.node import load_config
>>> config = load_config(env={}, overrides={"root": "/tmp/job", "network.name": "none"})
>>> config.state_dir, config.network.name
('/tmp/job/state', 'none')
"""

from podkit.node.build import (
    build_manager,
    build_networks,
    build_registry,
    build_runtime,
    manager_dirs,
    pause_config,
)
from podkit.node.config import (
    DEFAULT_ROOT,
    DEFAULT_STATE,
    NETWORK_MODES,
    CDISettings,
    CgroupSettings,
    ConfigField,
    CRISettings,
    NetworkBuiltin,
    NetworkSettings,
    NodeConfig,
    PauseSettings,
    RegistrySettings,
    RuntimeSettings,
    fields,
)
from podkit.node.load import (
    CONFIG_ENV,
    CONFIG_FILE,
    ConfigError,
    dump_config,
    load_config,
    reference_table,
)

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE",
    "DEFAULT_ROOT",
    "DEFAULT_STATE",
    "NETWORK_MODES",
    "CDISettings",
    "CRISettings",
    "CgroupSettings",
    "ConfigError",
    "ConfigField",
    "NetworkBuiltin",
    "NetworkSettings",
    "NodeConfig",
    "PauseSettings",
    "RegistrySettings",
    "RuntimeSettings",
    "build_manager",
    "build_networks",
    "build_registry",
    "build_runtime",
    "dump_config",
    "fields",
    "load_config",
    "manager_dirs",
    "pause_config",
    "reference_table",
]
