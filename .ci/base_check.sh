#!/usr/bin/env bash
# The base install's path: `pip install .` without extras into a fresh venv, then the CLI from
# a folder outside the checkout (every app's help, one tiny run of each method's command).
# Usage: .ci/base_check.sh VENV   (make check-base creates VENV and calls this)
set -euo pipefail
genlab="$(cd "$1" && pwd)/bin/genlab"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
export GENLAB_QUIET=1 OMP_NUM_THREADS=1
for app in "" nas optim gaze; do
    "$genlab" $app --help > /dev/null
done
"$genlab" nas search --out search --steps 2 --hessian-points 0
"$genlab" optim train --out optim --epochs 1 --measure-samples 64
"$genlab" gaze train --out gaze --steps 2 --eval-every 2 --train-count 64 --test-count 32 \
    --warmup-steps 0 --batch-size 16
test -f search/summary.json && test -f optim/summary.json && test -f gaze/summary.json
echo "base install: the CLI runs from $work without extras"
