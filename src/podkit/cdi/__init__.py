"""Container Device Interface: spec files, device names, edits, the cache, annotations.

>>> from podkit import cdi, oci
>>> cache = cdi.Cache(spec_dirs=["/etc/cdi", "/var/run/cdi"], auto_refresh=False)  # doctest: +SKIP
>>> cache.inject_devices(spec, ["vendor.com/gpu=0"])  # doctest: +SKIP
"""

from typing import TYPE_CHECKING

from podkit._lazy import lazy_names
from podkit.cdi.annotations import (
    ANNOTATION_PREFIX,
    AnnotationError,
    annotation_key,
    annotation_value,
    devices_from_request,
    parse_annotations,
    update_annotations,
)
from podkit.cdi.cache import (
    DEFAULT_DYNAMIC_DIR,
    DEFAULT_SPEC_DIRS,
    DEFAULT_STATIC_DIR,
    Cache,
    InjectionError,
    InvalidDeviceNamesError,
    LoadedDevice,
    LoadedSpec,
    UnresolvableDevicesError,
    generate_name_for_spec,
    generate_name_for_transient_spec,
    generate_spec_name,
    generate_transient_spec_name,
)
from podkit.cdi.default import configure, default_cache, inject_devices, refresh
from podkit.cdi.names import (
    InvalidNameError,
    is_qualified_name,
    parse_device,
    parse_qualified_name,
    parse_qualifier,
    qualified_name,
    validate_class_name,
    validate_device_name,
    validate_vendor_name,
)
from podkit.cdi.validator import SpecValidator, get_spec_validator, set_spec_validator

if TYPE_CHECKING:
    from podkit.cdi.edits import EditError, apply_edits, merge_edits
    from podkit.cdi.spec import (
        CURRENT_VERSION,
        HOOK_NAMES,
        KNOWN_VERSIONS,
        NO_PERMISSIONS,
        ContainerEdits,
        Device,
        DeviceNode,
        Hook,
        IntelRdt,
        Mount,
        NetDevice,
        Spec,
        SpecError,
        load_spec,
        minimum_required_version,
        model_to_dict,
        parse_spec,
        run_spec_validators,
        validate_container_edits,
        validate_env,
        validate_spec,
        validate_version,
    )

# The spec models, parsers and edits, imported on first use (PEP 562): a CRI server needs the
# cache and the annotations before its first reply, not the models and PyYAML.
_LAZY: dict[str, str] = {
    "EditError": "edits",
    "apply_edits": "edits",
    "merge_edits": "edits",
    "CURRENT_VERSION": "spec",
    "HOOK_NAMES": "spec",
    "KNOWN_VERSIONS": "spec",
    "NO_PERMISSIONS": "spec",
    "ContainerEdits": "spec",
    "Device": "spec",
    "DeviceNode": "spec",
    "Hook": "spec",
    "IntelRdt": "spec",
    "Mount": "spec",
    "NetDevice": "spec",
    "Spec": "spec",
    "SpecError": "spec",
    "load_spec": "spec",
    "minimum_required_version": "spec",
    "model_to_dict": "spec",
    "parse_spec": "spec",
    "run_spec_validators": "spec",
    "validate_container_edits": "spec",
    "validate_env": "spec",
    "validate_spec": "spec",
    "validate_version": "spec",
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())


__all__ = [
    "ANNOTATION_PREFIX",
    "CURRENT_VERSION",
    "DEFAULT_DYNAMIC_DIR",
    "DEFAULT_SPEC_DIRS",
    "DEFAULT_STATIC_DIR",
    "HOOK_NAMES",
    "KNOWN_VERSIONS",
    "NO_PERMISSIONS",
    "AnnotationError",
    "Cache",
    "ContainerEdits",
    "Device",
    "DeviceNode",
    "EditError",
    "Hook",
    "InjectionError",
    "IntelRdt",
    "InvalidDeviceNamesError",
    "InvalidNameError",
    "LoadedDevice",
    "LoadedSpec",
    "Mount",
    "NetDevice",
    "Spec",
    "SpecError",
    "SpecValidator",
    "UnresolvableDevicesError",
    "annotation_key",
    "annotation_value",
    "apply_edits",
    "configure",
    "default_cache",
    "devices_from_request",
    "generate_name_for_spec",
    "generate_name_for_transient_spec",
    "generate_spec_name",
    "generate_transient_spec_name",
    "get_spec_validator",
    "inject_devices",
    "is_qualified_name",
    "load_spec",
    "merge_edits",
    "minimum_required_version",
    "model_to_dict",
    "parse_annotations",
    "parse_device",
    "parse_qualified_name",
    "parse_qualifier",
    "parse_spec",
    "qualified_name",
    "refresh",
    "run_spec_validators",
    "set_spec_validator",
    "update_annotations",
    "validate_class_name",
    "validate_container_edits",
    "validate_device_name",
    "validate_env",
    "validate_spec",
    "validate_vendor_name",
    "validate_version",
]
