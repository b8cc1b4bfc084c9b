"""The report's reward families come from the task (``Task.report_group``), not from a rule of its own."""

from __future__ import annotations

import pytest

from harness.report.collect import family_rule, reward_curves

pytestmark = pytest.mark.torchfree

METRICS = [{"step": 1, "reward_mean": 0.5, "reward/keywords:existence": 1.0, "reward/keywords:frequency": 0.0,
            "reward/format:strict": 0.25}]


def test_ifollow_groups_constraint_types_by_their_group():
    curves = reward_curves(METRICS, family_of=family_rule("ifollow"))
    assert curves["keywords"] == {1: 0.5} and curves["format"] == {1: 0.25} and curves["all"] == {1: 0.5}


def test_another_task_keeps_each_logged_name_even_with_a_colon():
    curves = reward_curves(METRICS, family_of=family_rule("toolcall"))
    assert set(curves) == {"all", "keywords:existence", "keywords:frequency", "format:strict"}


def test_an_unknown_task_keeps_each_name():
    assert family_rule("no-such-task")("a:b") == "a:b"
