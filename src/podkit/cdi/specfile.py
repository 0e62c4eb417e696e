"""A spec as a document: parse it (strictly), read a file and validate it (the spec validators
then the built-in checks, as ``ReadSpec``), encode it for a file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from podkit.cdi import validator as _validator
from podkit.cdi.checks import validate_spec
from podkit.cdi.errors import SpecError
from podkit.cdi.models import Spec
from podkit.cdi.wire import decode, encode, load_document

__all__ = [
    "dump_spec",
    "load_spec",
    "model_to_dict",
    "parse_spec",
    "run_spec_validators",
    "spec_from_file_data",
]


def parse_spec(data: str | bytes, *, source: str | None = None, format: str | None = None) -> Spec:
    """Strictly decode a JSON or YAML spec document (no semantic validation).

    ``format`` may be ``"json"`` or ``"yaml"``; by default JSON is tried first when the text
    looks like JSON. Unknown keys, duplicate keys, wrong types and an empty document raise
    :class:`SpecError`.
    """
    try:
        doc, from_yaml = load_document(data, format)
        if doc is None:
            raise SpecError("failed to parse CDI Spec, no Spec data")
        return decode(Spec, doc, "", yaml_coerce=from_yaml)
    except SpecError as e:
        raise e.with_source(source) if source else e from None
    except UnicodeDecodeError as e:
        raise SpecError(f"failed to parse CDI Spec: {e}", source=source) from None


def load_spec(path: str | os.PathLike[str]) -> Spec:
    """Read, parse and validate a spec file (``ReadSpec``), with the process-wide validator."""
    p = os.fspath(path)
    try:
        raw = Path(p).read_bytes()
    except OSError as e:
        raise SpecError(f'failed to read CDI Spec "{p}": {e.strerror or e}') from None
    return spec_from_file_data(raw, p, validators=_validator.active(None))


def spec_from_file_data(raw: bytes, path: str, *,
                        validators: Sequence[_validator.SpecValidator] = ()) -> Spec:
    """Parse and validate the bytes of spec file ``path`` (format chosen by extension).

    ``validators`` run after parsing and before the built-in checks, as in the Go library.
    """
    p = path
    fmt = "json" if p.endswith(".json") else "yaml" if p.endswith(".yaml") else None
    spec = parse_spec(raw, source=p, format=fmt)
    run_spec_validators(spec, validators, p)
    try:
        validate_spec(spec)
    except SpecError as e:
        raise e.with_source(p) from None
    return spec


def run_spec_validators(spec: Spec, validators: Sequence[_validator.SpecValidator],
                        source: str | None = None) -> None:
    """Run each validator; the first rejection raises ``SpecError`` naming the validator."""
    for fn in validators:
        try:
            fn(spec)
        except SpecError as e:
            raise SpecError(f"rejected by spec validator {_validator.describe(fn)}: "
                            f"{e.message}", field=e.field, source=source) from None
        except Exception as e:
            raise SpecError(f"rejected by spec validator {_validator.describe(fn)}: "
                            f"{type(e).__name__}: {e}", source=source) from e


def model_to_dict(model: object) -> dict[str, Any]:
    """The wire form (camelCase keys, absent fields left out) of any CDI model."""
    if not attrs.has(type(model)):
        raise TypeError(f"not a CDI model: {type(model).__name__}")
    return encode(model)


def dump_spec(spec: Spec, name: str) -> str:
    """Encode a spec for a file called ``name``: JSON for ``.json``, else YAML."""
    return spec.to_json() if name.endswith(".json") else spec.to_yaml()
