"""The one GPU run of issues 52 and 53: ``bench/gpu_e2e.py`` (correctness: agreement, the CLI cell,
bands) then ``bench/gpu_step.py`` (cost: the paper recipes' steps), within ``--seconds`` in all:

    PYTHONUNBUFFERED=1 timeout 330 python3 bench/gpu_all.py            # on the GPU machine, $OUT set
    python bench/gpu_all.py --device cpu --seconds 600                 # the CPU form of both

Each script runs in its own process group with its own time limit (the e2e script gets
``--e2e-seconds``, the step script what is left, less a margin) and budgets its sections inside it;
their output is printed as it comes and copied to ``$OUT/gpu_all.log``. Exit status: the first
non-zero status of the two, else 0.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: seconds kept back from each script's limit for its own start and its last lines
MARGIN_S = 12.0


def stream(cmd: list[str], seconds: float, log: Path | None) -> int:
    """Run ``cmd``, printing and logging its output; its process group is killed past ``seconds``."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass

    timer = threading.Timer(seconds, kill)
    timer.start()
    with open(log, "a", encoding="utf-8") if log else open(os.devnull, "w") as sink:
        for line in proc.stdout:  # type: ignore[union-attr]
            print(line, end="", flush=True)
            sink.write(line)
            sink.flush()
    proc.wait()
    timer.cancel()
    if killed.is_set():
        print(f"gpu_all: {Path(cmd[1]).name} killed at its limit of {seconds:.0f} s", flush=True)
        return 124
    return proc.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=320.0, help="for both scripts (default 320)")
    ap.add_argument("--e2e-seconds", type=float, default=185.0, help="gpu_e2e.py's limit (default 185)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=os.environ.get("OUT"))
    args, extra = ap.parse_known_args(argv)
    start = time.monotonic()
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    log = out / "gpu_all.log" if out else None
    common = ["--device", args.device] + (["--out", str(out)] if out else []) + extra
    e2e_limit = min(args.e2e_seconds, args.seconds)
    rc_e2e = stream([sys.executable, "bench/gpu_e2e.py", "--budget", f"{e2e_limit - MARGIN_S:.0f}", *common],
                    e2e_limit, log)
    left = args.seconds - (time.monotonic() - start)
    rc_step = 124
    if left > 2 * MARGIN_S:
        rc_step = stream([sys.executable, "bench/gpu_step.py", "--budget", f"{left - MARGIN_S:.0f}", *common],
                         left, log)
    else:
        print(f"gpu_all: {left:.0f} s left, too little for gpu_step.py: not run", flush=True)
    print(f"gpu_all: gpu_e2e status {rc_e2e}, gpu_step status {rc_step}, {time.monotonic() - start:.0f} s",
          flush=True)
    return rc_e2e or rc_step


if __name__ == "__main__":
    sys.exit(main())
