"""OCI runtime-spec 1.3: typed models, lossless JSON codec, validation, defaults, spec options."""

from podkit.oci.codec import SpecError
from podkit.oci.defaults import *  # noqa: F403
from podkit.oci.defaults import __all__ as _defaults_all
from podkit.oci.features import Features, LinuxFeatures
from podkit.oci.opts import *  # noqa: F403
from podkit.oci.opts import __all__ as _opts_all
from podkit.oci.seccomp import *  # noqa: F403
from podkit.oci.seccomp import __all__ as _seccomp_all
from podkit.oci.spec import *  # noqa: F403
from podkit.oci.spec import __all__ as _spec_all
from podkit.oci.validate import (
    Problem,
    check,
    enum_problems,
    minimum_version,
    unknown_keys,
    unsupported_fields,
    validate,
    validate_features,
    validate_state,
)

__all__ = [
    *_spec_all,
    *_defaults_all,
    *_opts_all,
    *_seccomp_all,
    "Features",
    "LinuxFeatures",
    "Problem",
    "SpecError",
    "check",
    "enum_problems",
    "minimum_version",
    "unknown_keys",
    "unsupported_fields",
    "validate",
    "validate_features",
    "validate_state",
]
