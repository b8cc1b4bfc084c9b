"""The openrlhf backend: the same cells as the local backend, trained by OpenRLHF (Ray actors,
vLLM engines, DeepSpeed), from one GPU to a cluster. docs/openrlhf.md is the user's guide.

Modules that never import OpenRLHF (the mrbench process and the tests use them):

- :mod:`.backend`: the :class:`~harness.backends.base.Backend` (pre-flight refusals, dry run,
  ``train`` launching OpenRLHF, ``generate`` with the trained weights);
- :mod:`.checks`: what cannot run and why, and what this machine lacks;
- :mod:`.cell`: the run's files and the cell description the OpenRLHF processes read;
- :mod:`.argv`: the OpenRLHF command line and the placement of actors and engines;
- :mod:`.labels`: the label codec, the channel that carries an example, its K rewards and its
  verifiers' blocks beside OpenRLHF's scalar reward;
- :mod:`.frame`: mrbench's ``[B, T]`` token tensors in and out of OpenRLHF's right-padded
  ``[b, L-1]`` frame;
- :mod:`.shards`: the replay split into one shard of whole groups per policy actor, and its body;
- :mod:`.step`: one step's batch, advantages and metrics row, as the experience maker needs them;
- :mod:`.launch`: the OpenRLHF process (or Ray job) and its stop protocol.

Modules that run inside the OpenRLHF processes and import it: :mod:`.agent` (the rollout
worker's executor), :mod:`.maker` (the experience maker), :mod:`.trainer` (the policy actor and
trainer subclasses, :func:`~.trainer.install`) and :mod:`.main` (the entry point).
"""
