"""The built-in deterministic demo set: 360 RLLA examples over the 32 tools of :mod:`demo_tools`.

Kinds, by example index ``i`` (so the mix is fixed, not left to chance):

====================  ===========  ========================================================
``i % 10``            kind         content
====================  ===========  ========================================================
0, 1, 2               single       one call, required arguments only
3, 4                  optional     one call that also sets one or two optional arguments
5                     parallel     two calls of the same tool with different arguments
6                     multi        calls of two different tools
7                     no-call      a request no tool serves: the reference replies directly
8                     history      one call after an earlier exchange (call + ``<obs>``)
9                     single       as 0-2
====================  ===========  ========================================================

Each prompt lists the needed tools plus 2-4 distractors in a shuffled order. Everything is
drawn from ``random.Random(seed)`` with a fixed default seed, so the set is identical on every
machine. Split by blocks of ten consecutive examples (each block holds every kind): ``test`` =
the blocks ``i // 10`` divisible by 8 (5 blocks, 50 examples), ``train`` = the other 310.
"""

from __future__ import annotations

import random
from typing import Any

from tasks.toolcall.demo_tools import NO_CALL_TURNS, TOOLS, DemoTool, Param
from tasks.toolcall.parsing import ToolCall
from tasks.toolcall.prompts import answer_text, history_message, system_message

DEMO_SIZE = 360
DEMO_SEED = 20250601
TEST_EVERY = 8


def _say(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _pick(rng: random.Random, p: Param) -> Any:
    return rng.choice(p.pool)


def _call_and_request(rng: random.Random, tool: DemoTool, n_optional: int) -> tuple[ToolCall, str]:
    args: dict[str, Any] = {}
    for p in tool.params:
        if not p.optional:
            args[p.name] = _pick(rng, p)
    # two-place requests must not ask for X to X
    for a, b in (("origin", "destination"), ("from_currency", "to_currency"), ("base", "quote"),
                 ("from_unit", "to_unit")):
        if a in args and b in args and args[a] == args[b]:
            pool = [v for v in next(p for p in tool.params if p.name == b).pool if v != args[a]]
            args[b] = rng.choice(pool)
    text = tool.request.format(**{k: _say(v) for k, v in args.items()})
    optional = [p for p in tool.params if p.optional]
    chosen = rng.sample(optional, min(n_optional, len(optional)))
    if chosen:
        extra = []
        for p in sorted(chosen, key=lambda q: tool.params.index(q)):
            value = _pick(rng, p)
            args[p.name] = value
            extra.append(p.phrase.format(v=_say(value)))
        text = text.rstrip(".?!") + ", " + " and ".join(extra) + "."
    ordered = {p.name: args[p.name] for p in tool.params if p.name in args}
    return ToolCall(tool.name, ordered), text


def _prompt_tools(rng: random.Random, needed: list[DemoTool]) -> list[tuple[str, str, Any]]:
    others = [t for t in TOOLS if t not in needed]
    shown = needed + rng.sample(others, rng.randint(2, 4))
    rng.shuffle(shown)
    return [(t.name, t.description, t.schema()) for t in shown]


def _think(calls: list[ToolCall]) -> str:
    names = list(dict.fromkeys(c.name for c in calls))
    pronoun = "it" if len(names) == 1 else "them"
    return f"The user's request is served by {', '.join(names)}; I will call {pronoun} with the values they gave."


def generate(size: int = DEMO_SIZE, seed: int = DEMO_SEED) -> list[dict[str, Any]]:
    """Demo rows in the ToolRL parquet layout: ``{id, prompt, reward_model: {ground_truth}, extra_info}``."""
    rng = random.Random(seed)
    rows = []
    tools_with_optional = [t for t in TOOLS if any(p.optional for p in t.params)]
    for i in range(size):
        slot = i % 10
        turns: list[tuple[str, str]] = []
        if slot == 7:
            request, reply = NO_CALL_TURNS[(i // 10) % len(NO_CALL_TURNS)]
            needed = [rng.choice(TOOLS)]
            turns.append(("user", request))
            answer = answer_text("No available tool is needed for this; I can answer directly.", None, reply)
            kind = "no-call"
        else:
            if slot in (3, 4):
                tool = rng.choice(tools_with_optional)
                call, request = _call_and_request(rng, tool, 1 if slot == 3 else 2)
                calls, needed, kind = [call], [tool], "optional"
            elif slot == 5:
                tool = rng.choice(TOOLS)
                first, r1 = _call_and_request(rng, tool, 0)
                second, r2 = _call_and_request(rng, tool, 0)
                for _ in range(10):
                    if second.parameters != first.parameters:
                        break
                    second, r2 = _call_and_request(rng, tool, 0)
                calls, needed, kind = [first, second], [tool], "parallel"
                request = f"{r1} Also: {r2}"
            elif slot == 6:
                t1, t2 = rng.sample(TOOLS, 2)
                c1, r1 = _call_and_request(rng, t1, 0)
                c2, r2 = _call_and_request(rng, t2, 0)
                calls, needed, kind = [c1, c2], [t1, t2], "multi"
                request = f"{r1} And then: {r2}"
            else:
                tool = rng.choice(TOOLS)
                call, request = _call_and_request(rng, tool, 0)
                calls, needed, kind = [call], [tool], "single"
            if slot == 8:
                earlier_tool = rng.choice([t for t in TOOLS if t is not needed[0]])
                earlier, earlier_request = _call_and_request(rng, earlier_tool, 0)
                needed = needed + [earlier_tool]
                turns.append(("user", earlier_request))
                turns.append(("raw", answer_text(_think([earlier]), [earlier])))
                turns.append(("tool", f'[{{"name": "{earlier.name}", "results": {{"status": "ok"}}}}]'))
                kind = "history"
            turns.append(("user", request))
            answer = answer_text(_think(calls), calls)
        tools = _prompt_tools(rng, needed)
        messages = [system_message(tools), history_message(turns)]
        split = "test" if (i // 10) % TEST_EVERY == 0 else "train"
        rows.append({
            "id": f"demo-{i:04d}",
            "data_source": "mrbench-demo",
            "prompt": messages,
            "reward_model": {"ground_truth": answer, "style": "rule"},
            "extra_info": {"index": i, "split": split, "demo_kind": kind},
        })
    return rows


def write_jsonl(path: str, split: str = "test", responses: str = "reference") -> int:
    """Write the demo split as ToolRL-layout JSONL rows, each with a ``response`` field.

    ``responses``: ``"reference"`` (the reference answer, which scores format 1 and correctness 3
    or 0), ``"empty"`` (an empty string) or ``"none"`` (no response field: plain example rows).
    """
    import json

    if responses not in ("reference", "empty", "none"):
        raise ValueError(f"unknown responses mode {responses!r}; known: reference, empty, none")
    rows = [r for r in generate() if r["extra_info"]["split"] == split]
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            if responses != "none":
                row = {**row, "response": row["reward_model"]["ground_truth"] if responses == "reference" else ""}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    """``python -m tasks.toolcall.demo OUT.jsonl [train|test] [reference|empty|none]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tasks.toolcall.demo",
                                 description="Write a split of the built-in toolcall demo set (ToolRL-layout JSONL "
                                             "rows) with a 'response' field, ready for mrbench score toolcall.")
    ap.add_argument("out", metavar="OUT.jsonl", help="the file to write")
    ap.add_argument("split", nargs="?", default="test", choices=("train", "test"),
                    help="which split of the demo set (default: test)")
    ap.add_argument("responses", nargs="?", default="reference", choices=("reference", "empty", "none"),
                    help="the response of each row: reference (the reference answer: format 1, correctness 3 or "
                         "0), empty (an empty string), none (no response field; default: reference)")
    args = ap.parse_args(argv)
    n = write_jsonl(args.out, args.split, args.responses)
    print(f"wrote {n} demo rows to {args.out}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
