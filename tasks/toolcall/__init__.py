"""Tool calling in the RLLA format (ToolRL recipe) and BFCL-v4 scoring.

Modules, in the order a training step reads them:

- :mod:`~tasks.toolcall.task`: ``ToolCallTask`` (registered as ``toolcall``);
- :mod:`~tasks.toolcall.data`: ToolRL parquet / JSON / JSONL rows, split files, hub loading;
- :mod:`~tasks.toolcall.demo` and :mod:`~tasks.toolcall.demo_tools`: the built-in demo set;
- :mod:`~tasks.toolcall.templates` and :mod:`~tasks.toolcall.prompts`: prompt and block texts;
- :mod:`~tasks.toolcall.parsing`: tags, the call block, the tool list of a prompt;
- :mod:`~tasks.toolcall.rewards`: the format and correctness rewards;
- :mod:`~tasks.toolcall.bfcl_prompts`, :mod:`~tasks.toolcall.bfcl_checker`,
  :mod:`~tasks.toolcall.bfcl_convert`, :mod:`~tasks.toolcall.bfcl_gold`: BFCL prompts, decoding,
  the AST checker with the official semantics, Java/JavaScript value conversion, oracle answers
  (the evaluator itself is :mod:`evals.bfcl`).
"""
