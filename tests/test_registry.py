import subprocess
import sys

import pytest

pytestmark = pytest.mark.torchfree

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
    """``lazy(name, "module:Object")`` says where a built-in lives; its ``@register`` runs on first lookup,
    and the description is the first line of the docstring, written once."""
    (tmp_path / "widget_defs.py").write_text(
        "from tests_widget_registry import WIDGETS\n\n"
        "@WIDGETS.register('gear')\nclass Gear:\n    \"\"\"A toothed wheel.\n\n    More text.\"\"\"\n")
    (tmp_path / "tests_widget_registry.py").write_text(
        "from mrbench_core.registry import Registry\nWIDGETS = Registry('widget')\n"
        "WIDGETS.lazy('gear', 'widget_defs:Gear')\nWIDGETS.lazy('ghost', 'widget_defs:Ghost')\n")
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


def _widget_package(tmp_path, monkeypatch, defs: str, rows: str, name: str):
    (tmp_path / f"{name}_defs.py").write_text(f"from {name}_registry import WIDGETS\n\n" + defs)
    (tmp_path / f"{name}_registry.py").write_text(
        "from mrbench_core.registry import Registry\n"
        f"WIDGETS = Registry('widget', base='{name}_base:Widget')\n" + rows)
    (tmp_path / f"{name}_base.py").write_text("class Widget:\n    name = ''\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    return importlib.import_module(f"{name}_registry").WIDGETS


def test_registration_sets_the_class_name(tmp_path, monkeypatch):
    widgets = _widget_package(tmp_path, monkeypatch, "from w1_base import Widget\n\n"
                              "@WIDGETS.register('gear')\nclass Gear(Widget):\n    pass\n",
                              "WIDGETS.lazy('gear', 'w1_defs:Gear')\n", "w1")
    assert widgets.get("gear").name == "gear"


@pytest.mark.parametrize("defs, rows, message", [
    # the row names another object than the decorated one
    ("from w2_base import Widget\n\n@WIDGETS.register('gear')\nclass Cog(Widget):\n    pass\n",
     "WIDGETS.lazy('gear', 'w2_defs:Gear')\n", "the lazy row names 'w2_defs:Gear', but w2_defs:Cog registers it"),
    # the class says another name than its registration
    ("from w2_base import Widget\n\n@WIDGETS.register('gear')\nclass Gear(Widget):\n    name = 'cog'\n",
     "WIDGETS.lazy('gear', 'w2_defs:Gear')\n", "says its name is 'cog'"),
    # a decorated built-in without a row (found on the first lookup of its module's other names)
    (("from w2_base import Widget\n\n@WIDGETS.register('gear')\nclass Gear(Widget):\n    pass\n\n"
      "@WIDGETS.register('forgot-row')\nclass ForgotRow(Widget):\n    pass\n"),
     "WIDGETS.lazy('gear', 'w2_defs:Gear')\n", "'forgot-row': w2_defs:ForgotRow registers it in a built-in module"),
    # not a subclass of the registry's base class
    ("@WIDGETS.register('gear')\nclass Gear:\n    name = ''\n",
     "WIDGETS.lazy('gear', 'w2_defs:Gear')\n", "is not a subclass of w2_base:Widget"),
])
def test_registration_refuses_disagreement(tmp_path, monkeypatch, defs, rows, message):
    sys.modules.pop("w2_defs", None)
    sys.modules.pop("w2_registry", None)
    widgets = _widget_package(tmp_path, monkeypatch, defs, rows, "w2")
    with pytest.raises(RegistryError, match="cannot import|" + message) as err:
        widgets.get("gear")
    assert message in str(err.value)


def test_a_lazy_row_must_name_the_object():
    with pytest.raises(RegistryError, match="must name the object"):
        Registry("widget").lazy("gear", "widget_defs")


def test_an_object_without_a_docstring_is_reported_as_such():
    """``mrbench list`` shows a plugin without a class docstring as undescribed, not as a blank."""
    reg = Registry("widget")

    @reg.register("bare")
    class Bare:
        pass

    assert reg.description("bare") == f"(no description: {__name__}:" \
        "test_an_object_without_a_docstring_is_reported_as_such.<locals>.Bare has no docstring)"
