"""YAML for CDI specs: a strict reader (duplicate keys refused) and the writer.

Its own module so that ``import podkit.cdi`` does not load PyYAML: only a YAML spec file (or
writing one) needs it, and a CRI server with no spec files never does.
"""

from __future__ import annotations

from typing import Any

import yaml

from podkit.cdi.errors import SpecError

__all__ = ["dump", "load"]


class _StrictLoader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    """PyYAML safe loader that refuses duplicate mapping keys."""


def _construct_mapping(loader: Any, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            dup = key in seen
        except TypeError:
            continue
        if dup:
            mark = key_node.start_mark
            raise SpecError(
                f"failed to parse CDI Spec: duplicate key {key!r} "
                f"(line {mark.line + 1}, column {mark.column + 1})"
            )
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load(text: str) -> Any:
    """The value of one YAML document; :class:`SpecError` (one line) when it is not YAML."""
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as e:
        raise SpecError(f"failed to parse CDI Spec: {e}".replace("\n", " ")) from None


def dump(doc: Any) -> str:
    """``doc`` as a YAML document body, keys in the order given."""
    out: str = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)
    return out
