"""``ContainerConfig`` both ways: env, mounts, devices, and the config itself."""

from __future__ import annotations

from podkit.container import (
    ContainerConfig,
    ContainerMetadata,
    Device,
    KeyValue,
    LinuxContainerConfig,
    Mount,
    MountPropagation,
)
from podkit.cri import api_pb2 as pb
from podkit.cri.convert.fields import (
    ConversionError,
    each,
    enum_number,
    enum_value,
    fill_fields,
    set_field,
)
from podkit.cri.convert.resources import optional_resources_from, set_optional_resources
from podkit.cri.convert.security import (
    container_security_from,
    container_security_to,
    id_mapping_from,
    id_mapping_to,
)
from podkit.cri.convert.signals import cri_signal, signal_number
from podkit.errors import quote

__all__ = ["container_config_from_cri", "container_config_to_cri", "mount_to"]


def _env_from(msg: pb.KeyValue, path: str) -> KeyValue:
    try:
        value = msg.value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConversionError(f"{path}.value", f"not UTF-8 ({exc.reason})") from None
    return KeyValue(key=msg.key, value=value)


def _env_to(kv: KeyValue, path: str) -> pb.KeyValue:
    out = pb.KeyValue()
    try:
        value = kv.value.encode("utf-8")
    except (AttributeError, UnicodeEncodeError) as exc:
        raise ConversionError(f"{path}.value",
                              f"{quote(kv.value)} is not UTF-8 text: {exc}") from None
    fill_fields(out, path, {"key": kv.key, "value": value})
    return out


def _mount_from(msg: pb.Mount, path: str) -> Mount:
    if msg.HasField("image"):
        raise ConversionError(f"{path}.image", "image volumes are not supported by podkit")
    if msg.image_sub_path:
        raise ConversionError(f"{path}.image_sub_path", "image volumes are not supported")
    return Mount(
        container_path=msg.container_path,
        host_path=msg.host_path,
        readonly=msg.readonly,
        selinux_relabel=msg.selinux_relabel,
        propagation=enum_value(MountPropagation, msg.propagation, f"{path}.propagation"),
        uid_mappings=tuple(each(msg.uidMappings, f"{path}.uidMappings", id_mapping_from)),
        gid_mappings=tuple(each(msg.gidMappings, f"{path}.gidMappings", id_mapping_from)),
        recursive_read_only=msg.recursive_read_only,
    )


def mount_to(m: Mount, path: str) -> pb.Mount:
    out = pb.Mount()
    fill_fields(out, path, {
        "container_path": m.container_path,
        "host_path": m.host_path,
        "readonly": m.readonly,
        "selinux_relabel": m.selinux_relabel,
        "propagation": enum_number(MountPropagation, m.propagation, f"{path}.propagation"),
        "recursive_read_only": m.recursive_read_only,
    })
    out.uidMappings.extend(each(m.uid_mappings, f"{path}.uidMappings", id_mapping_to))
    out.gidMappings.extend(each(m.gid_mappings, f"{path}.gidMappings", id_mapping_to))
    return out


def _device_from(msg: pb.Device, path: str) -> Device:
    return Device(
        container_path=msg.container_path, host_path=msg.host_path, permissions=msg.permissions
    )


def _device_to(d: Device, path: str) -> pb.Device:
    out = pb.Device()
    fill_fields(out, path, {"container_path": d.container_path, "host_path": d.host_path,
                      "permissions": d.permissions})
    return out


def container_config_from_cri(
    msg: pb.ContainerConfig, *, path: str = "config"
) -> ContainerConfig:
    """CRI ``ContainerConfig`` (of ``CreateContainerRequest.config``) to a ``ContainerConfig``."""
    if not msg.HasField("metadata"):
        raise ConversionError(f"{path}.metadata", "required")
    if not msg.HasField("image"):
        raise ConversionError(f"{path}.image", "required")
    lpath = f"{path}.linux"
    return ContainerConfig(
        metadata=ContainerMetadata(name=msg.metadata.name, attempt=msg.metadata.attempt),
        image=msg.image.image,
        command=tuple(msg.command),
        args=tuple(msg.args),
        working_dir=msg.working_dir,
        envs=tuple(each(msg.envs, f"{path}.envs", _env_from)),
        mounts=tuple(each(msg.mounts, f"{path}.mounts", _mount_from)),
        devices=tuple(each(msg.devices, f"{path}.devices", _device_from)),
        labels=dict(msg.labels),
        annotations=dict(msg.annotations),
        log_path=msg.log_path,
        stdin=msg.stdin,
        stdin_once=msg.stdin_once,
        tty=msg.tty,
        linux=LinuxContainerConfig(
            resources=optional_resources_from(msg.linux, "resources", lpath),
            security_context=container_security_from(
                msg.linux.security_context, f"{lpath}.security_context"
            ),
        ),
        cdi_devices=tuple(d.name for d in msg.CDI_devices),
        stop_signal=signal_number(msg.stop_signal, path=f"{path}.stop_signal") or 0,
    )


def container_config_to_cri(
    config: ContainerConfig, *, path: str = "config"
) -> pb.ContainerConfig:
    """A ``ContainerConfig`` to CRI ``ContainerConfig``; ``linux`` is always sent."""
    out = pb.ContainerConfig()
    fill_fields(out.metadata, f"{path}.metadata",
          {"name": config.metadata.name, "attempt": config.metadata.attempt})
    set_field(out.image, "image", config.image, f"{path}.image")
    out.image.SetInParent()
    fill_fields(out, path, {
        "command": config.command,
        "args": config.args,
        "working_dir": config.working_dir,
        "labels": dict(config.labels),
        "annotations": dict(config.annotations),
        "log_path": config.log_path,
        "stdin": config.stdin,
        "stdin_once": config.stdin_once,
        "tty": config.tty,
        "stop_signal": cri_signal(config.stop_signal, path=f"{path}.stop_signal"),
    })
    out.envs.extend(each(config.envs, f"{path}.envs", _env_to))
    out.mounts.extend(each(config.mounts, f"{path}.mounts", mount_to))
    out.devices.extend(each(config.devices, f"{path}.devices", _device_to))
    for i, name in enumerate(config.cdi_devices):
        set_field(out.CDI_devices.add(), "name", name, f"{path}.CDI_devices[{i}]")
    lpath = f"{path}.linux"
    set_optional_resources(out.linux, "resources", config.linux.resources, lpath)
    out.linux.security_context.CopyFrom(
        container_security_to(config.linux.security_context, f"{lpath}.security_context")
    )
    return out
