"""``Problem``: one thing wrong with a document, the unit every OCI check reports."""

from __future__ import annotations

import attrs


@attrs.frozen
class Problem:
    """One thing wrong with a document: where (a JSON path such as ``$.linux.namespaces[2].type``)
    and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"
