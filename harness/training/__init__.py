"""The training step's room: the step, written once, and everything it and the loop around it use
that is not engine code (the engines live in :mod:`harness.backends`).

- :mod:`~harness.training.step` -- the step itself (:class:`~harness.training.step.Step`): the
  order of one step, top to bottom; start here;
- :mod:`~harness.training.engine` -- what a backend supplies (the ``Engine`` protocol) and the
  step's plan (``StepPlan``);
- :mod:`~harness.training.phases` -- the phase names, their timer and the test probe;
- :mod:`~harness.training.batch` -- the step's data (``Rollout``) and the batch's tensors;
- :mod:`~harness.training.data_order` -- which examples a step draws;
- :mod:`~harness.training.step_metrics`, :mod:`~harness.training.step_diagnostics` -- the metrics
  row, the sample rows and the run summary, with the per-reward diagnostics;
- :mod:`~harness.training.credit_log`, :mod:`~harness.training.credit_rows`,
  :mod:`~harness.training.credit_store` -- ``credit.jsonl``: the training hook, its row format and
  the file;
- :mod:`~harness.training.relevance_guard` -- never silently become GDPO;
- :mod:`~harness.training.run_loop`, :mod:`~harness.training.stop_signal` -- the loop around the
  steps (resume, checkpoints, signals, the no-signal watch).
"""
