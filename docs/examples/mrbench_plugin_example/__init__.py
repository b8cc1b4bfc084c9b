"""Example mrbench plugins, one per kind, registered through entry points (see ../pyproject.toml):

- ``example-echo`` (:mod:`.task`): say a given word; two rewards, each with a verifier block;
- ``example-clip`` (:mod:`.algorithm`): GDPO with each reward's group advantage clipped;
- ``example-echo-bench`` (:mod:`.evaluator`): a benchmark scored on the echo task's prompts;
- ``example-canned`` (:mod:`.backend`): a model-free backend that trains a softmax policy over
  a fixed list of responses.
"""
