"""The algorithm registry.

Each algorithm registers itself where it is defined (``@ALGORITHMS.register("grpo")``); the
table below only says which module defines each built-in, so that looking one up imports that
module alone. ``mrtpo+<name>`` and ``mrtpo-oracle+<name>`` exist for every registered
response-level reweighter, built-in or plugin: they are derived from the registry, never listed
by hand.
"""

from __future__ import annotations

from typing import Any

from mrbench_core.registry import Registry, UnknownNameError

ALGORITHMS = Registry("algorithm", "mrbench.algorithms")
COMPOSITE_PREFIX = "mrtpo+"
#: the MRTPO-family algorithms that compose with a reweighter as ``<base>+<reweighter>``
COMPOSITE_BASES = ("mrtpo", "mrtpo-oracle")

for _name, _module in [
    ("grpo", "algorithms.grpo"), ("gdpo", "algorithms.gdpo"),
    ("saw", "algorithms.reweight"), ("dara", "algorithms.reweight"), ("dvao", "algorithms.reweight"),
    ("gd2po", "algorithms.reweight"), ("sa-mrpo", "algorithms.reweight"),
    ("mrtpo", "algorithms.mrtpo"), ("mrtpo-joint", "algorithms.mrtpo"), ("mrtpo-shuffled", "algorithms.mrtpo"),
    ("mrtpo-oracle", "algorithms.mrtpo"),
    ("cort", "algorithms.cort"), ("opsd", "algorithms.opsd"),
]:
    ALGORITHMS.lazy(_name, _module)

_composed: dict[str, Any] = {}


def reweighters() -> list[str]:
    """Registered names whose class is a response-level reweighter other than MRTPO's own
    aggregator, GDPO (``mrtpo`` itself); imports the algorithms."""
    from algorithms.gdpo import Reweighter
    from algorithms.mrtpo import MRTPO

    def composable(target: Any) -> bool:
        return isinstance(target, type) and issubclass(target, Reweighter) and target is not MRTPO.aggregator_class

    return [n for n in ALGORITHMS.names() if composable(ALGORITHMS.get(n))]


def list_algorithms() -> list[str]:
    """Every algorithm name, the derived ``<base>+<reweighter>`` composites included, sorted."""
    return sorted(ALGORITHMS.names() + [f"{b}+{n}" for b in COMPOSITE_BASES for n in reweighters()])


def resolve(name: str) -> Any:
    """The class (or factory) registered as ``name``; composites are built on first use."""
    if name in ALGORITHMS:
        return ALGORITHMS.get(name)
    base, _, inner = name.partition("+")
    if not inner or base not in COMPOSITE_BASES:
        raise UnknownNameError(f"unknown algorithm {name!r}; known algorithms: {', '.join(list_algorithms())}")
    if name not in _composed:
        from algorithms.gdpo import Reweighter
        from algorithms.mrtpo import compose

        target = ALGORITHMS.get(inner) if inner in ALGORITHMS else None
        if not (isinstance(target, type) and issubclass(target, Reweighter)):
            raise UnknownNameError(f"unknown algorithm {name!r}: {inner!r} is not a registered response-level "
                                   f"reweighter; known algorithms: {', '.join(list_algorithms())}")
        _composed[name] = compose(target, ALGORITHMS.get(base))
    return _composed[name]


def describe_algorithms() -> list[tuple[str, str]]:
    """(name, description) for every algorithm, composites included."""
    from mrbench_core.registry import first_doc_line

    return [(n, ALGORITHMS.description(n) if n in ALGORITHMS else first_doc_line(resolve(n)))
            for n in list_algorithms()]


def get_algorithm(name: str, **config: Any) -> Any:
    """Instantiate algorithm ``name`` with its config keys; unknown names and keys are errors
    that list the known ones."""
    return resolve(name)(**config)
