"""Hypothesis strategies for valid CDI specs."""

from __future__ import annotations

from hypothesis import strategies as st

from podkit import cdi

_alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_letters = _alnum[:52]

vendor_names = st.builds(
    lambda a, mid, z: a + mid + z,
    st.sampled_from(_letters),
    st.text(_alnum + "_-.", max_size=8),
    st.sampled_from(_alnum),
) | st.sampled_from(_letters)
device_names = st.builds(
    lambda a, mid, z: a + mid + z,
    st.sampled_from(_alnum),
    st.text(_alnum + "_-.:", max_size=8),
    st.sampled_from(_alnum),
) | st.sampled_from(_alnum)
paths = st.text("abcxyz/._-", min_size=1, max_size=12).map(lambda s: "/" + s)
env = st.builds(lambda k, v: f"{k}={v}", st.text(_alnum + "_", min_size=1, max_size=6),
                st.text(max_size=6))
u32 = st.integers(0, 2**32 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
opt_str = st.none() | st.text(max_size=6)

device_nodes = st.builds(
    cdi.DeviceNode,
    path=paths,
    host_path=st.none() | paths,
    type=st.none() | st.sampled_from(["", "b", "c", "u", "p"]),
    major=st.none() | i64,
    minor=st.none() | i64,
    file_mode=st.none() | u32,
    permissions=st.none() | st.sampled_from(["", "r", "rw", "rwm", "mw", "none"]),
    uid=st.none() | u32,
    gid=st.none() | u32,
)
mounts = st.builds(
    cdi.Mount,
    host_path=paths,
    container_path=paths,
    options=st.none() | st.lists(st.sampled_from(["ro", "bind", "rbind", "nosuid"]), max_size=3),
    type=st.none() | st.sampled_from(["bind", "tmpfs"]),
)
hooks = st.builds(
    cdi.Hook,
    hook_name=st.sampled_from(cdi.HOOK_NAMES),
    path=paths,
    args=st.none() | st.lists(st.text(max_size=5), max_size=3),
    env=st.none() | st.lists(env, max_size=2),
    timeout=st.none() | st.integers(0, 2**31),
)
intel_rdt = st.builds(
    cdi.IntelRdt,
    clos_id=st.none() | st.sampled_from(["", "/", "gold", "cos1"]),
    l3_cache_schema=opt_str,
    mem_bw_schema=opt_str,
    schemata=st.none() | st.lists(st.text(max_size=5), max_size=2),
    enable_monitoring=st.none() | st.booleans(),
)


@st.composite
def net_devices(draw: st.DrawFn) -> list[cdi.NetDevice]:
    hosts = draw(st.lists(st.text(_alnum, min_size=1, max_size=5), unique=True, max_size=3))
    names = draw(st.lists(st.text(_alnum, min_size=1, max_size=5), unique=True,
                          min_size=len(hosts), max_size=len(hosts)))
    return [cdi.NetDevice(host_interface_name=h, name=n) for h, n in zip(hosts, names,
                                                                          strict=True)]


container_edits = st.builds(
    cdi.ContainerEdits,
    env=st.none() | st.lists(env, max_size=3),
    device_nodes=st.none() | st.lists(device_nodes, max_size=2),
    hooks=st.none() | st.lists(hooks, max_size=2),
    mounts=st.none() | st.lists(mounts, max_size=2),
    intel_rdt=st.none() | intel_rdt,
    additional_gids=st.none() | st.lists(u32, max_size=3),
    net_devices=st.none() | net_devices(),
)
annotations = st.none() | st.dictionaries(st.text(_alnum, min_size=1, max_size=5),
                                          st.text(max_size=5), max_size=2)


@st.composite
def specs(draw: st.DrawFn) -> cdi.Spec:
    """A spec that passes validation (cdiVersion = its minimum required version)."""
    names = draw(st.lists(device_names, min_size=1, max_size=3, unique=True))
    devices = []
    for n in names:
        edits = draw(container_edits.filter(lambda e: not e.is_empty()))
        devices.append(cdi.Device(name=n, annotations=draw(annotations), container_edits=edits))
    spec = cdi.Spec(
        kind=f"{draw(vendor_names)}/{draw(vendor_names)}",
        annotations=draw(annotations),
        devices=devices,
        container_edits=draw(st.none() | container_edits),
    )
    import attrs

    return attrs.evolve(spec, cdi_version=cdi.minimum_required_version(spec))
