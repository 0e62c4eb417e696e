"""Public names of a package imported from their modules on first use (PEP 562), so a
process pays for a submodule only when it touches one of its names."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, table: Mapping[str, str], namespace: dict[str, Any]
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: ``table`` maps each lazy name to
    its submodule; a name once imported is kept in ``namespace`` (the package's globals)."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # __import__, not importlib: the import statement's path (``-X importtime`` sees it)
        value = getattr(__import__(f"{package}.{module}", fromlist=[name]), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__
