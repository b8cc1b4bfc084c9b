"""mrbench's tasks where other trainers train: their prompts and verifiers in the forms TRL and verl take.

- :mod:`mrbench_integrations.task_rewards`: what both share: a task's examples as self-contained
  JSON, the names of its rewards across prompts (one per constraint type for instruction
  following), and one completion scored under the verifiers' time budget, never raising.
- :mod:`mrbench_integrations.trl`: a ``datasets.Dataset`` of prompts and one reward function per
  reward for TRL's ``GRPOTrainer`` (docs/trl-and-verl.md).
- :mod:`mrbench_integrations.verl`: a ``compute_score`` for verl's reward managers.
- :mod:`mrbench_integrations.verl_parquet`: ``python -m mrbench_integrations.verl_parquet``
  writes a task's prompts as the parquet files verl's trainer reads.

Nothing here imports TRL or verl: TRL calls the reward functions and verl calls ``compute_score``;
``datasets`` and ``pandas`` are imported where a dataset or a parquet file is built.
"""
