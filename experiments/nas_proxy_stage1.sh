#!/bin/sh
# Stage 1 of docs/nas_proxy.md: the zero-cost scores of the 200-cell draw, then every
# candidate proxy's trainings on it, in the protocol's order. Every command resumes (a
# folder holding a run's config.json and CSV continues it), so rerun this script after a stop.
#
#     experiments/nas_proxy_stage1.sh RUNS NB201_TABLE
#
# Stage 1 runs at the commit its runs began at, d899413 (docs/nas_proxy.md, the amendment on
# the shapes' row order): run this with that commit's genlab, e.g. from a worktree
# (git worktree add ../stage1 d899413) whose src is on PYTHONPATH; a copy of a run's
# config.json and CSV from docs/nas_proxy/ in RUNS continues it.
set -eu
RUNS=${1:?usage: nas_proxy_stage1.sh RUNS NB201_TABLE}
TABLE=${2:?usage: nas_proxy_stage1.sh RUNS NB201_TABLE}
W=${WORKERS:-2}

genlab nas score --out "$RUNS/scores" --resume --nb201-table "$TABLE"

fidelity() {  # NAME, then the candidate's options
    name=$1
    shift
    genlab nas fidelity "$@" --out "$RUNS/$name" --resume --workers "$W" \
        --nb201-table "$TABLE" --scores "$RUNS/scores/scores.csv"
}

fidelity shapes32 --dataset shapes --size 32 -C 8 -N 1 --epochs 8 --no-augment --repeat 50
fidelity shapes16 --dataset shapes --size 16 -C 8 -N 1 --epochs 20 --no-augment
fidelity digits-deep --dataset digits --size 8 -C 8 -N 5 --epochs 20 --no-augment --lr 0.1
fidelity digits --dataset digits --size 8 -C 16 -N 1 --epochs 30
fidelity digits-clutter --dataset digits-clutter --size 16 -C 8 -N 1 --epochs 20 --repeat 50
