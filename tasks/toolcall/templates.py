"""Text templates of the tool-calling task: the RLLA system prompt and the verifier blocks.

Every piece of prose the task puts in front of a model lives here, so that prompts and
verifier blocks (paper Appendix C) can be read and changed in one place. Templates use
``str.format`` fields; code elsewhere only fills them in.

- ``SYSTEM_PROMPT``: the RLLA-style system message listing the tools (name, description,
  JSON parameters) and the think / tool-call / response output format. Written for this
  project; the structure (tool list, steps, output format, notes) follows the recipe.
- ``TOOL_ENTRY``: one numbered tool in that list.
- ``HISTORY_HEADER`` / ``TURN``: the user message that carries the dialogue history.
- ``FORMAT_BLOCKS``: the format verifier's block Z_format, one per kind of reference answer.
- ``CORRECTNESS_BLOCK``: the correctness verifier's block Z_correct listing the reference calls.
"""

from __future__ import annotations

SYSTEM_PROMPT = """You are a helpful multi-turn dialogue assistant that can call tools to solve the user's tasks and give structured chat replies.

**Available Tools**
You may use these tools in your answer:
{tool_list}

**Steps for Each Turn**
1. **Think:** recall the relevant context and work out what the user wants now.
2. **Decide on Tool Usage:** if a tool is needed, pick it and fill in its parameters.
3. **Respond Appropriately:** if a reply is needed, write one that stays consistent with the conversation.

**Output Format**
```plaintext
<think> Your thoughts and reasoning </think>
<tool_call>
{{"name": "Tool name", "parameters": {{"Parameter name": "Parameter content", "... ...": "... ..."}}}}
{{"name": "... ...", "parameters": {{"... ...": "... ...", "... ...": "... ..."}}}}
...
</tool_call>
<response> AI's final response </response>
```

**Important Notes**
1. Always begin with the `<think>` field holding your reasoning. Give at least one of `<tool_call>` or `<response>`; decide whether you need `<tool_call>` (one or more calls), `<response>`, or both.
2. Several tool calls may go in one `<tool_call>` field, one JSON object per line, each with a "name" field and a "parameters" field holding a dictionary of arguments. A tool without arguments gets an empty dictionary.
3. Use the earlier dialogue records in the history: the user's queries, earlier `<tool_call>` and `<response>` fields, and tool results marked `<obs>` (if any)."""

TOOL_ENTRY = """{index}. Name: {name}
Description: {description}
Parameters: {parameters}"""

HISTORY_HEADER = "**Dialogue Records History**"

#: one turn of the dialogue history, by role; BFCL system messages become notes in the history
TURN = {
    "user": "<user> {content} </user>",
    "assistant": "<response> {content} </response>",
    "system": "<system> {content} </system>",
    "tool": "<obs> {content} </obs>",
}

#: Z_format, keyed by the kind of the reference answer (see ``rewards.answer_kind``)
FORMAT_BLOCKS = {
    "tool_call": (
        "Required format for this answer: first <think> your reasoning </think>, then on a new line "
        "<tool_call>, then one JSON object per line of the form "
        '{"name": ..., "parameters": {...}}, then </tool_call> on its own line. '
        "Each of these tags appears exactly once, nothing comes before <think> or after </tool_call>, "
        "and there is no <response> field."
    ),
    "tool_call+response": (
        "Required format for this answer: first <think> your reasoning </think>, then on a new line "
        "<tool_call>, then one JSON object per line of the form "
        '{"name": ..., "parameters": {...}}, then </tool_call> on its own line, then on a new line '
        "<response> your reply </response>. Each of these tags appears exactly once and nothing comes "
        "before <think> or after </response>."
    ),
    "response": (
        "Required format for this answer: first <think> your reasoning </think>, then on a new line "
        "<response> your reply to the user </response>. Each of these tags appears exactly once, "
        "nothing comes before <think> or after </response>, and there is no <tool_call> field."
    ),
    "think": (
        "Required format for this answer: only <think> your reasoning </think>, with each tag exactly "
        "once and nothing before or after it."
    ),
}

CORRECTNESS_BLOCK = """The reference answer makes these tool calls, one JSON object per line:
{calls}"""

#: OPSD teacher context: the reference answer shown as an earlier assistant turn, then the prompt again
TEACHER_REPEAT = "{prompt}"
