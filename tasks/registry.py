"""The task registry: each task registers itself where it is defined
(``@TASKS.register("toolcall")``); the table below names the object each built-in is, so that a
lookup imports that module alone and registration checks that the two agree.
An entry resolves to a callable taking the task's options (``task.options``) and returning a
:class:`tasks.base.Task`; its description is the first line of that callable's docstring."""

from __future__ import annotations

from typing import Any

from mrbench_core.registry import Registry

TASKS = Registry("task", "mrbench.tasks", base="tasks.base:Task")

BUILTINS = {
    "toolcall": "tasks.toolcall.task:ToolCallTask",
    "text2sql": "tasks.text2sql.task:Text2SQLTask",
    "ifollow": "tasks.ifollow.task:InstructionFollowingTask",
}
for _name, _spec in BUILTINS.items():
    TASKS.lazy(_name, _spec)


def make_task(name: str, **options: Any) -> Any:
    """A task instance; unknown names list the known ones."""
    return TASKS.get(name)(**options)
