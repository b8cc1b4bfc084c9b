"""One strict name -> object registry, used by every kind of plug-in part.

Each kind has one :class:`Registry`, owned by the layer that defines the kind:

=============  ==================================  ===============================
kind           registry                            entry-point group (plugins)
=============  ==================================  ===============================
algorithm      ``algorithms.registry.ALGORITHMS``  ``mrbench.algorithms``
task           ``tasks.registry.TASKS``            ``mrbench.tasks``
evaluator      ``evals.registry.EVALUATORS``       ``mrbench.evaluators``
backend        ``harness.backends.BACKENDS``       ``mrbench.backends``
constraint     ``tasks.ifollow.constraints.base.CONSTRAINTS``  ``mrbench.constraints``
judge          ``evals.ifollow_judge.JUDGES``      ``mrbench.judges``
=============  ==================================  ===============================

Registering happens next to the definition, with the decorator::

    from algorithms.registry import ALGORITHMS

    @ALGORITHMS.register("grpo")
    class GRPO(Algorithm):
        \"\"\"Group z-score of the summed reward, no batch rescale.\"\"\"

The first line of the object's docstring is its description (written once). So that looking one
name up does not import every module (and torch), the owning layer lists where each built-in
lives: ``ALGORITHMS.lazy("grpo", "algorithms.grpo:GRPO")`` says "``algorithms.grpo`` defines the
class ``GRPO``, which registers ``grpo``"; the module is imported on first lookup, and the object
it registers must be the one the row names. An outside package adds entries
through its entry-point group, e.g. in its ``pyproject.toml``::

    [project.entry-points."mrbench.algorithms"]
    my-algo = "my_package.algo:MyAlgorithm"

Plugins are loaded once, on the first lookup or listing. Registering a name twice raises
:class:`RegistryError`; an unknown name raises :class:`UnknownNameError` listing the known ones.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from typing import Any

_UNSET = object()


class RegistryError(RuntimeError):
    """A registry was used incorrectly (duplicate name, broken lazy target)."""


class UnknownNameError(KeyError):
    """A name that is not registered. The message lists every known name."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0])


@dataclass
class Entry:
    name: str
    target: Any = _UNSET  # the object; a "module:attr" string for a plugin entry point
    module: str | None = None  # built-in placeholder: importing this module registers the name
    description: str = ""
    spec: str | None = None  # built-in placeholder: the "module:attr" the lazy row names

    @property
    def resolved(self) -> bool:
        return self.target is not _UNSET and not isinstance(self.target, str)


def import_target(spec: str) -> Any:
    """Import ``"package.module:attr"`` (attr may be dotted)."""
    if ":" not in spec:
        raise RegistryError(f"lazy target {spec!r} must look like 'package.module:attr'")
    module_name, attr = spec.split(":", 1)
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def first_doc_line(obj: Any) -> str:
    doc = (getattr(obj, "__doc__", None) or "").strip()
    return doc.splitlines()[0].strip() if doc else ""


def spec_of(obj: Any) -> str:
    """``"module:qualname"`` of a class or function: how a lazy row names it."""
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', type(obj).__qualname__)}"


class Registry:
    """Names of one kind -> objects; see the module docstring.

    ``base`` (``"module:Class"``, imported only when a class is registered) is the class every
    registered class must derive from; a class's ``name`` attribute is set to its registered
    name, or checked against it where the class sets its own.
    """

    def __init__(self, kind: str, entry_point_group: str | None = None, base: str | None = None):
        self.kind = kind
        self.entry_point_group = entry_point_group
        self.base = base
        self._entries: dict[str, Entry] = {}
        self._plugins_loaded = entry_point_group is None
        self._plugin_error: RegistryError | None = None

    # -- registration -------------------------------------------------------------------
    def lazy(self, name: str, spec: str) -> None:
        """Declare that importing ``spec``'s module registers ``name`` as ``spec``'s object
        (``"algorithms.gdpo:GDPO"``; a built-in, looked up lazily)."""
        self._check_name(name)
        if ":" not in spec:
            raise RegistryError(f"{self.kind} {name!r}: the lazy row {spec!r} must name the object, "
                                f"'package.module:Object'")
        if name in self._entries:
            raise RegistryError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = Entry(name, module=spec.split(":", 1)[0], spec=spec)

    def add(self, name: str, target: Any, description: str = "") -> None:
        """Register ``target`` (an object, or a lazy ``"module:attr"`` string) under ``name``.

        A built-in's lazy row must name ``target`` (module and qualified name); a class defined in
        a module that holds other built-ins needs a row of its own; a class's ``name`` attribute
        is set to ``name`` or must already equal it; ``base`` is checked."""
        self._check_name(name)
        entry = self._entries.get(name)
        if entry is not None and not (entry.module is not None and entry.target is _UNSET):
            raise RegistryError(f"{self.kind} {name!r} is already registered")
        if not isinstance(target, str):
            self._check_target(name, target, entry)
        module = entry.module if entry is not None else None
        spec = entry.spec if entry is not None else None
        self._entries[name] = Entry(name, target, module, description, spec)

    def register(self, name: str, description: str = "") -> Callable[[Any], Any]:
        """Decorator form of :meth:`add`, used at the definition."""

        def deco(obj: Any) -> Any:
            self.add(name, obj, description)
            return obj

        return deco

    def _check_name(self, name: Any) -> None:
        if not isinstance(name, str) or not name:
            raise RegistryError(f"{self.kind} names must be non-empty strings, got {name!r}")

    def _check_target(self, name: str, target: Any, entry: Entry | None) -> None:
        where = spec_of(target)
        if entry is not None and entry.spec is not None and entry.spec != where:
            raise RegistryError(f"{self.kind} {name!r}: the lazy row names {entry.spec!r}, but {where} "
                                f"registers it; make them agree")
        if entry is None and isinstance(target, type):
            rows = [e.name for e in self._entries.values() if e.module == target.__module__ and e.spec]
            if rows:
                raise RegistryError(f"{self.kind} {name!r}: {where} registers it in a built-in module "
                                    f"(rows: {', '.join(rows)}) without a lazy row of its own; add "
                                    f"{name!r}: {where!r} to the table")
        if isinstance(target, type):
            if self.base is not None:
                base = import_target(self.base)
                if not issubclass(target, base):
                    raise RegistryError(f"{self.kind} {name!r}: {where} is not a subclass of {self.base}")
            if hasattr(target, "name"):
                own = target.__dict__.get("name")
                if own and own != name:
                    raise RegistryError(f"{self.kind} {name!r}: {where} says its name is {own!r}; "
                                        f"drop its name attribute (registration sets it) or make them agree")
                target.name = name

    # -- plugins --------------------------------------------------------------------------
    def _load_plugins(self) -> None:
        """Add the entry points' rows once. A plugin that takes a name already registered is an
        error on this and every later lookup (every command says the same, none goes on with the
        built-in in silence, and a caller that catches the first one cannot hide it from the next)."""
        if self._plugins_loaded:
            if self._plugin_error is not None:
                raise self._plugin_error
            return
        self._plugins_loaded = True
        for ep in metadata.entry_points(group=self.entry_point_group):
            if ep.name in self._entries:
                self._plugin_error = RegistryError(
                    f"plugin entry point {ep.value!r} in group {self.entry_point_group!r} registers {self.kind} "
                    f"{ep.name!r}, which is already registered; uninstall that plugin or rename its entry point")
                raise self._plugin_error
            self._entries[ep.name] = Entry(ep.name, ep.value)

    # -- lookup ----------------------------------------------------------------------------
    def names(self) -> list[str]:
        self._load_plugins()
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        self._load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def entry(self, name: str) -> Entry:
        self._load_plugins()
        if name not in self._entries:
            known = ", ".join(self.names()) or "(none)"
            raise UnknownNameError(f"unknown {self.kind} {name!r}; known {self.kind}s: {known}")
        return self._entries[name]

    def get(self, name: str) -> Any:
        entry = self.entry(name)
        if entry.resolved:
            return entry.target
        source = entry.target if isinstance(entry.target, str) else entry.module
        try:
            if isinstance(entry.target, str):
                target = import_target(entry.target)
                self._check_target(name, target, None)
                entry.target = target
            else:
                importlib.import_module(entry.module or "")
        except (ImportError, AttributeError) as exc:
            raise RegistryError(f"{self.kind} {name!r}: cannot import {source!r}: {exc}") from exc
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise RegistryError(f"{self.kind} {name!r}: importing {source!r} raised {type(exc).__name__}"
                                + (f": {first}" if first else "")) from exc
        entry = self._entries[name]
        if not entry.resolved:
            raise RegistryError(f"{self.kind} {name!r}: importing {entry.module!r} did not register it "
                                f"(expected a @register({name!r}) there)")
        return entry.target

    def description(self, name: str) -> str:
        """The registered description, else the first line of the object's docstring; an object without
        one is reported as such (``mrbench list`` shows that, not a blank)."""
        entry = self.entry(name)
        if entry.description:
            return entry.description
        try:
            target = self.get(name)
        except RegistryError as exc:
            return f"(unavailable: {exc})"
        return first_doc_line(target) or f"(no description: {spec_of(target)} has no docstring)"

    def describe(self) -> list[tuple[str, str]]:
        return [(n, self.description(n)) for n in self.names()]
