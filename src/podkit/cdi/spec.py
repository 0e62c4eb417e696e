"""CDI spec models (versions 0.3.0 ... 1.1.0), strict JSON/YAML parsing, validation, versions.

One name for what several modules do: the models (``models``), their strict wire codec
(``wire``), reading and writing spec documents (``specfile``), versions (``versions``), the
semantic checks (``checks``) and ``SpecError`` (``errors``). Parsing is strict like the Go
library: unknown keys, duplicate keys, wrong types and empty documents are errors that name the
JSON path and the file. Semantic validation follows the Go library rule by rule.
"""

from __future__ import annotations

from podkit.cdi.checks import validate_container_edits, validate_env, validate_spec
from podkit.cdi.errors import SpecError
from podkit.cdi.models import (
    HOOK_NAMES,
    NO_PERMISSIONS,
    ContainerEdits,
    Device,
    DeviceNode,
    Hook,
    IntelRdt,
    Mount,
    NetDevice,
    Spec,
)
from podkit.cdi.specfile import (
    dump_spec,
    load_spec,
    model_to_dict,
    parse_spec,
    run_spec_validators,
)
from podkit.cdi.specfile import spec_from_file_data as spec_from_file_data
from podkit.cdi.versions import (
    CURRENT_VERSION,
    KNOWN_VERSIONS,
    minimum_required_version,
    validate_version,
)

__all__ = [
    "CURRENT_VERSION",
    "HOOK_NAMES",
    "KNOWN_VERSIONS",
    "NO_PERMISSIONS",
    "ContainerEdits",
    "Device",
    "DeviceNode",
    "Hook",
    "IntelRdt",
    "Mount",
    "NetDevice",
    "Spec",
    "SpecError",
    "dump_spec",
    "load_spec",
    "minimum_required_version",
    "model_to_dict",
    "parse_spec",
    "run_spec_validators",
    "validate_container_edits",
    "validate_env",
    "validate_spec",
    "validate_version",
]
