"""``python cell_run.py ARGS...``: ``mrbench ARGS...`` with the tests' toy task registered (the
OpenRLHF processes register it through the shim's test-plugin hook)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from toy_task import register  # noqa: E402

from harness.cli import main  # noqa: E402

if __name__ == "__main__":
    register()
    sys.exit(main(sys.argv[1:]))
