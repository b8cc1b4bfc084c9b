"""The task registry: each task registers itself where it is defined
(``@TASKS.register("toolcall")``); the table below only says which module defines each built-in.
An entry resolves to a callable taking the task's options (``task.options``) and returning a
:class:`tasks.base.Task`; its description is the first line of that callable's docstring."""

from __future__ import annotations

from typing import Any

from mrbench_core.registry import Registry

TASKS = Registry("task", "mrbench.tasks")

for _name, _module in [("toolcall", "tasks.toolcall.task"), ("text2sql", "tasks.text2sql.task"),
                       ("ifollow", "tasks.ifollow.task")]:
    TASKS.lazy(_name, _module)


def make_task(name: str, **options: Any) -> Any:
    """A task instance; unknown names list the known ones."""
    return TASKS.get(name)(**options)
