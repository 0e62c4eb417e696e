"""The official CDI JSON schema (draft-07) and spec validators built on it (Go ``schema``).

>>> from podkit import cdi
>>> from podkit.cdi import schema
>>> cdi.set_spec_validator(schema.validate_spec_schema)  # every spec loaded or written
>>> schema.builtin().errors({})[0]
"$: 'cdiVersion' is a required property"
>>> cdi.set_spec_validator(None)

``schema.json`` and ``defs.json`` ship in this package unchanged from
cncf-tags/container-device-interface (Apache-2.0, see ``LICENSE`` here). The schema is a coarse
structural check (it knows no name syntax and lets unknown keys pass); podkit's own parsing and
``validate_spec`` do the semantic checks either way.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft7Validator  # type: ignore[import-untyped]
from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT7

from podkit.cdi.spec import Spec, SpecError

__all__ = ["SchemaValidator", "builtin", "validate_spec_schema"]

BUILTIN_NAME = "schema.json"


def _resource(contents: Any) -> Resource[Any]:
    return Resource.from_contents(contents, default_specification=DRAFT7)


def _retriever(read: Callable[[str], bytes], where: str) -> Callable[[str], Resource[Any]]:
    """Resolve a relative ``$ref`` (``defs.json#/...``) to a file beside the schema."""

    def retrieve(uri: str) -> Resource[Any]:
        if not uri or "/" in uri or "\\" in uri or uri.startswith("."):
            raise SpecError(f'CDI schema {where}: reference "{uri}" is not a file beside it')
        try:
            return _resource(json.loads(read(uri)))
        except (OSError, ValueError) as e:
            raise SpecError(f'CDI schema {where}: cannot load "{uri}": {e}') from None

    return retrieve


def _spec_error_in(exc: BaseException) -> SpecError | None:
    """The ``SpecError`` our retriever raised somewhere in ``exc``'s chain, if any."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, SpecError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class SchemaValidator:
    """A CDI JSON schema; an instance is a spec validator (``cdi.set_spec_validator``).

    ``schema`` is the parsed root document and ``read(name)`` returns the bytes of a file
    it refers to (``defs.json``); ``source`` names the schema in error messages.
    """

    def __init__(self, schema: Mapping[str, Any], read: Callable[[str], bytes],
                 source: str) -> None:
        self.source = source
        try:
            Draft7Validator.check_schema(schema)
        except SchemaError as e:
            raise SpecError(f"CDI schema {source} is not a valid JSON schema: {e.message}",
                            source=source) from None
        registry: Registry[Any] = Registry(retrieve=_retriever(read, source))  # type: ignore[call-arg]
        self._validator = Draft7Validator(schema, registry=registry)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> SchemaValidator:
        """A schema file; relative references resolve to files in its directory."""
        p = Path(path)
        try:
            schema = json.loads(p.read_bytes())
        except (OSError, ValueError) as e:
            raise SpecError(f"cannot load CDI schema {p}: {e}", source=str(p)) from None
        if not isinstance(schema, dict):
            raise SpecError(f"CDI schema {p} is not a JSON object", source=str(p))
        return cls(schema, lambda name: (p.parent / name).read_bytes(), str(p))

    def __repr__(self) -> str:
        return f"SchemaValidator({self.source!r})"

    def errors(self, doc: Any) -> list[str]:
        """Every problem of ``doc`` as ``"<JSON path>: <message>"``; ``[]`` when valid."""
        try:
            found = sorted(self._validator.iter_errors(doc), key=lambda e: list(map(str, e.path)))
        except Unresolvable as e:
            cause = _spec_error_in(e)
            why = f": {cause.message}" if cause is not None else ""
            raise SpecError(f'CDI schema {self.source}: unresolvable reference "{e.ref}"{why}',
                            source=self.source) from None
        return [f"{e.json_path}: {e.message}" for e in found]

    def validate_data(self, doc: Any, source: str | None = None) -> None:
        """Raise ``SpecError`` listing every problem of a parsed document (``source``: its file)."""
        problems = self.errors(doc)
        if problems:
            raise SpecError("schema validation failed: " + "; ".join(problems), source=source)

    def validate_file(self, path: str | os.PathLike[str]) -> None:
        """Parse a JSON or YAML spec file and validate it against the schema."""
        p = os.fspath(path)
        try:
            with open(p, "rb") as f:
                doc = yaml.safe_load(f)
        except (OSError, yaml.YAMLError) as e:
            raise SpecError(f"failed to read CDI Spec for schema validation: {e}",
                            source=p) from None
        self.validate_data(doc, p)

    def __call__(self, spec: Spec) -> None:
        """Validate a parsed spec (its wire form)."""
        self.validate_data(spec.to_dict())


def _read_builtin(name: str) -> bytes:
    return resources.files(__name__).joinpath(name).read_bytes()


@functools.cache
def builtin() -> SchemaValidator:
    """The official CDI schema shipped with podkit."""
    schema = json.loads(_read_builtin(BUILTIN_NAME))
    return SchemaValidator(schema, _read_builtin, f"podkit.cdi.schema/{BUILTIN_NAME}")


def validate_spec_schema(spec: Spec) -> None:
    """A ready spec validator: raise ``SpecError`` unless ``spec`` matches the official schema."""
    builtin()(spec)
