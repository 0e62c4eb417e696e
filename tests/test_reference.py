"""The field tables of docs/reference.md and docs/config.md are the ones the models make
(``scripts/gen_reference.py``, issue 23): a field added to ``SandboxConfig``,
``ContainerConfig``, a class they hold or the node config fails here until its docstring is
written and the tables are made again."""

from __future__ import annotations

import sys
from pathlib import Path

import attrs
import pytest

from podkit.container import ContainerConfig
from podkit.node import fields
from podkit.sandbox import SandboxConfig

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import gen_reference  # noqa: E402

PAGES = {page.name: page.read_text() for page in gen_reference.PAGES}
STALE = f"out of date: run {gen_reference.COMMAND}"


def test_each_model_has_one_region() -> None:
    found = [name for text in PAGES.values() for name in gen_reference.regions(text)]
    assert sorted(found) == sorted(gen_reference.REGIONS)
    assert gen_reference.regions(PAGES["config.md"]) == ["NodeConfig"]


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_tables_are_the_models(page: str) -> None:
    assert gen_reference.render_page(PAGES[page]) == PAGES[page], f"docs/{page}: {STALE}"


@pytest.mark.parametrize("root", [SandboxConfig, ContainerConfig])
def test_every_field_has_a_row(root: type) -> None:
    text = PAGES["reference.md"]
    for cls in gen_reference.closure(root):
        if not attrs.has(cls):
            assert f"| `{cls.__name__}` |" in text, f"enum {cls.__name__}: {STALE}"
            continue
        section = text.split(f"### `{cls.__name__}`\n", 1)
        assert len(section) == 2, f"{cls.__name__} has no table: {STALE}"
        table = section[1].split("\n### ", 1)[0]
        for f in attrs.fields(cls):
            assert f"| `{f.name}` |" in table, f"{cls.__name__}.{f.name}: {STALE}"


def test_the_closure_holds_the_nested_configs() -> None:
    names = {c.__name__ for c in gen_reference.closure(SandboxConfig)}
    assert {"PodSandboxMetadata", "LinuxPodSandboxConfig", "LinuxSandboxSecurityContext",
            "NamespaceOption", "UserNamespace", "IDMapping", "LinuxContainerResources",
            "HugepageLimit", "NamespaceMode"} <= names
    names = {c.__name__ for c in gen_reference.closure(ContainerConfig)}
    assert {"ContainerMetadata", "Mount", "Device", "KeyValue", "LinuxContainerConfig",
            "LinuxContainerSecurityContext", "Capability", "SecurityProfile"} <= names


def test_every_node_config_key_is_in_config_md() -> None:
    for f in fields():
        assert f"| `{f.key}` | `{f.env}` |" in PAGES["config.md"], f"{f.key}: {STALE}"


def test_a_field_without_a_docstring_is_refused() -> None:
    @attrs.frozen
    class Undocumented:
        """A model whose field has no docstring."""

        name: str = ""

    with pytest.raises(gen_reference.MissingDocError, match=r"Undocumented\.name has no doc"):
        gen_reference.class_table(Undocumented)


def test_check_mode_names_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    page.write_text("<!-- fields:ContainerConfig -->\nstale\n<!-- /fields -->\n")
    monkeypatch.setattr(gen_reference, "ROOT", tmp_path)
    monkeypatch.setattr(gen_reference, "PAGES", (page,))
    assert gen_reference.main(["--check"]) == 1
    assert gen_reference.COMMAND in capsys.readouterr().err
    assert "stale" in page.read_text()
    assert gen_reference.main([]) == 0
    assert "| `stop_signal` |" in page.read_text()
    assert gen_reference.main(["--check"]) == 0


def test_the_tables_hold_annotations_as_written() -> None:
    """A test that resolved the models' types (``attrs.resolve_types``) changes nothing."""
    attrs.resolve_types(SandboxConfig)
    attrs.resolve_types(ContainerConfig)
    assert gen_reference.render_page(PAGES["reference.md"]) == PAGES["reference.md"]
