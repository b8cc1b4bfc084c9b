"""One strict name -> object registry, used for tasks, algorithms, backends and evaluators.

- Registering a name twice raises ``RegistryError``.
- Looking up an unknown name raises ``UnknownNameError`` listing the known names.
- An entry may be lazy: the string ``"package.module:attr"`` is imported on first lookup,
  so that importing ``harness`` does not import torch or an optional backbone.
- Outside packages add entries through the entry-point group named by ``entry_point_group``
  (for example ``mrbench.tasks``); they are loaded once, on the first lookup or listing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from typing import Any


class RegistryError(RuntimeError):
    """A registry was used incorrectly (duplicate name, broken lazy target)."""


class UnknownNameError(KeyError):
    """A name that is not registered. The message lists every known name."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0])


@dataclass
class Entry:
    name: str
    target: Any  # the object, or "module:attr" for a lazy entry
    description: str = ""

    @property
    def is_lazy(self) -> bool:
        return isinstance(self.target, str)


def import_target(spec: str) -> Any:
    """Import ``"package.module:attr"`` (attr may be dotted)."""
    if ":" not in spec:
        raise RegistryError(f"lazy target {spec!r} must look like 'package.module:attr'")
    module_name, attr = spec.split(":", 1)
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


class Registry:
    def __init__(self, kind: str, entry_point_group: str | None = None):
        self.kind = kind
        self.entry_point_group = entry_point_group
        self._entries: dict[str, Entry] = {}
        self._plugins_loaded = entry_point_group is None

    # -- registration -------------------------------------------------------------------
    def add(self, name: str, target: Any, description: str = "") -> None:
        if not isinstance(name, str) or not name:
            raise RegistryError(f"{self.kind} names must be non-empty strings, got {name!r}")
        if name in self._entries:
            raise RegistryError(f"{self.kind} {name!r} is already registered")
        if not description and not isinstance(target, str):
            doc = (getattr(target, "__doc__", None) or "").strip()
            description = doc.splitlines()[0] if doc else ""
        self._entries[name] = Entry(name, target, description)

    def register(self, name: str, description: str = "") -> Callable[[Any], Any]:
        """Decorator form of :meth:`add`."""

        def deco(obj: Any) -> Any:
            self.add(name, obj, description)
            return obj

        return deco

    # -- plugins --------------------------------------------------------------------------
    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        for ep in metadata.entry_points(group=self.entry_point_group):
            if ep.name in self._entries:
                raise RegistryError(
                    f"plugin entry point {ep.value!r} in group {self.entry_point_group!r} "
                    f"registers {self.kind} {ep.name!r}, which is already registered"
                )
            self._entries[ep.name] = Entry(ep.name, ep.value, f"plugin ({ep.value})")

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
        if entry.is_lazy:
            try:
                entry.target = import_target(entry.target)
            except (ImportError, AttributeError) as exc:
                raise RegistryError(f"{self.kind} {name!r}: cannot import {entry.target!r}: {exc}") from exc
        return entry.target

    def describe(self) -> list[tuple[str, str]]:
        return [(n, self._entries[n].description) for n in self.names()]
