"""CPU time of every registered constraint checker on hostile text, at two sizes, and their ratio.

Hostile text is one piece repeated: brackets, asterisks, spaces, words with no punctuation, one
long word, '. ' (a sentence per two characters), 'P.S. ', newlines and '<'. A checker that is linear
in the response length shows a ratio near the size ratio (4 for the defaults); a quadratic one shows
its square. Each checker pays for its own tokenization (the IFBench memos are cleared first), and
the cyclic garbage collector is off while timing.

    python bench/verifier_hostile_text.py [--sizes 262144 1048576] [--over 0.05] [--only muldimif ...]

Prints one row per (checker, text) whose larger-size time exceeds ``--over`` seconds, then the
slowest ten overall. Kwargs come from the fuzz tests' samples (the real data files where
``MRBENCH_DATA_DIR`` is set).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

PIECES = {"brackets": "[", "asterisks": "*", "spaces": " ", "no punctuation": "word ", "one long word": "a",
          "full stops": ". ", "postscripts": "P.S. ", "newlines": "\n", "angle brackets": "<"}


def cpu_seconds(checker, text: str, kwargs: dict) -> float:
    from tasks.ifollow.constraints import ifbench_common as ifc

    for memo in (ifc.punkt_sentences, ifc.sentence_spans, ifc.treebank_words):
        memo.cache_clear()
    start = time.process_time()
    try:
        checker(text, dict(kwargs))
    except Exception:  # noqa: BLE001, S110  (a checker error is a failed check; only the time matters here)
        pass
    return time.process_time() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs=2, default=[1 << 18, 1 << 20])
    ap.add_argument("--over", type=float, default=0.05)
    ap.add_argument("--only", nargs="*", default=[])
    args = ap.parse_args()
    from test_ifollow_core_fuzz import SAMPLES

    from tasks.ifollow.constraints import CONSTRAINTS

    small, large = args.sizes
    rows = []
    gc.disable()
    for kind, piece in PIECES.items():
        texts = [(piece * (n // len(piece) + 1))[:n] for n in (small, large)]
        for cid in sorted(CONSTRAINTS.names()):
            if args.only and not any(o in cid for o in args.only):
                continue
            checker, kw = CONSTRAINTS.get(cid).checker, SAMPLES[cid][0]
            t_small, t_large = (cpu_seconds(checker, t, kw) for t in texts)
            rows.append((t_large, cid, kind, t_small))
            if t_large > args.over:
                ratio = t_large / t_small if t_small > 0 else float("inf")
                print(f"{cid:48s} {kind:15s} {t_small:7.3f} s {t_large:7.3f} s  x{ratio:5.1f}", flush=True)
    gc.enable()
    print(f"\nslowest at {large} characters:")
    for t_large, cid, kind, t_small in sorted(rows, reverse=True)[:10]:
        print(f"  {cid:48s} {kind:15s} {t_large:7.3f} s (x{t_large / t_small if t_small else float('inf'):.1f})")


if __name__ == "__main__":
    main()
