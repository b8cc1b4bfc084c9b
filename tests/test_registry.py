import subprocess
import sys

import pytest

from mrbench_core.registry import Registry, RegistryError, UnknownNameError


def test_register_twice_raises():
    reg = Registry("widget")
    reg.add("a", object())
    with pytest.raises(RegistryError, match="already registered"):
        reg.add("a", object())


def test_unknown_name_lists_known_names():
    reg = Registry("widget")
    reg.add("alpha", 1)
    reg.add("beta", 2)
    with pytest.raises(UnknownNameError) as info:
        reg.get("gamma")
    assert "unknown widget 'gamma'" in str(info.value)
    assert "alpha, beta" in str(info.value)


def test_lazy_entry_imports_on_first_get():
    reg = Registry("widget")
    reg.add("join", "os.path:join", "path join")
    assert not reg.entry("join").resolved
    import os.path

    assert reg.get("join") is os.path.join
    assert reg.entry("join").resolved
    assert reg.describe() == [("join", "path join")]


def test_registration_at_the_definition_through_a_module_index(tmp_path, monkeypatch):
    """``lazy(name, module)`` says where a built-in lives; its ``@register`` runs on first lookup,
    and the description is the first line of the docstring, written once."""
    (tmp_path / "widget_defs.py").write_text(
        "from tests_widget_registry import WIDGETS\n\n"
        "@WIDGETS.register('gear')\nclass Gear:\n    \"\"\"A toothed wheel.\n\n    More text.\"\"\"\n")
    (tmp_path / "tests_widget_registry.py").write_text(
        "from mrbench_core.registry import Registry\nWIDGETS = Registry('widget')\n"
        "WIDGETS.lazy('gear', 'widget_defs')\nWIDGETS.lazy('ghost', 'widget_defs')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    mod = importlib.import_module("tests_widget_registry")
    assert mod.WIDGETS.names() == ["gear", "ghost"] and not mod.WIDGETS.entry("gear").resolved
    assert mod.WIDGETS.get("gear").__name__ == "Gear"
    assert mod.WIDGETS.description("gear") == "A toothed wheel."
    with pytest.raises(RegistryError, match="did not register it"):
        mod.WIDGETS.get("ghost")


def test_broken_lazy_target_is_a_clear_error():
    reg = Registry("widget")
    reg.add("nope", "no_such_module_xyz:thing")
    with pytest.raises(RegistryError, match="cannot import 'no_such_module_xyz:thing'"):
        reg.get("nope")


def test_decorator_registers_with_docstring_description():
    reg = Registry("widget")

    @reg.register("w")
    class W:
        """A widget that does things.

        More text."""

    assert reg.get("w") is W
    assert reg.describe() == [("w", "A widget that does things.")]


def test_entry_points_are_loaded(monkeypatch):
    from importlib import metadata

    class FakeEP:
        name = "plugin-task"
        value = "os.path:basename"

    def fake_entry_points(group=None):
        return [FakeEP()] if group == "mrbench.widgets" else []

    monkeypatch.setattr(metadata, "entry_points", fake_entry_points)
    reg = Registry("widget", "mrbench.widgets")
    reg.add("builtin", 1)
    assert reg.names() == ["builtin", "plugin-task"]
    import os.path

    assert reg.get("plugin-task") is os.path.basename


def test_importing_harness_imports_no_torch():
    code = "import harness, harness.config, harness.records, harness.cli; import sys; " \
           "print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
