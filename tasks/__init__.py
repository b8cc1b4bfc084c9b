"""Tasks: data, prompts, verifiers, verifier blocks and benchmark scoring.

Each task package (``tasks.toolcall``, ``tasks.text2sql``, ``tasks.ifollow``) implements
:class:`tasks.base.Task`. The protocol lives in :mod:`tasks.base`.
"""
