"""Backends: what trains a policy for one run and generates with it.

``BACKENDS`` maps a name to a :class:`harness.backends.base.Backend` subclass; each built-in
registers itself where it is defined, and outside packages add theirs through the
``mrbench.backends`` entry-point group. The contract is written in :mod:`harness.backends.base`.
"""

from __future__ import annotations

from mrbench_core.registry import Registry

BACKENDS = Registry("backend", "mrbench.backends", base="harness.backends.base:Backend")
BUILTINS = {
    "local": "harness.backends.local:LocalBackend",
    "openrlhf": "harness.backends.openrlhf.backend:OpenRLHFBackend",
}
for _name, _spec in BUILTINS.items():
    BACKENDS.lazy(_name, _spec)
