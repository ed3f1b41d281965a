#!/bin/sh
# The tables of docs/nas_proxy.md, printed from the committed files alone and recorded as
# results files (docs/results/nas_proxy_*.json: the command, what it printed, the commit);
# `make results` then writes them into the page under their commands. Run from the
# repository's root after copying a stage's latest config.json and CSV into docs/nas_proxy/.
# Stage 2's tables need the whole NB201 table (its random cells are the table's exact
# distribution): TABLE, by default the one the Makefile finds.
#
#     experiments/nas_proxy_record.sh [TABLE]
set -eu
D=docs/nas_proxy
R=runs/nas_proxy_record
TABLE=${1:-../shared/data/nb201_accuracy.csv}
rm -rf "$R"
record() {  # NAME TITLE, then the command (the loops' variables left alone)
    _file=docs/results/nas_proxy_$1.json
    _title=$2
    shift 2
    python -m genlab.core.results --record "$_file" --title "$_title" -- "$@"
}
record scores "Zero-cost proxies over the 200 cells: tau against NB201" \
    genlab nas score --config $D/scores/config.json --scores-from $D/scores/scores.csv \
    --out $R/scores --nb201-table $D/nb201_draw.csv
for run in $D/stage1/*/; do
    run=${run%/}
    name=$(basename "$run")
    record "stage1_$name" "Stage 1, $name: cell fidelity" \
        genlab nas fidelity --config "$run/config.json" --cells-from "$run/cells.csv" \
        --no-train --out "$R/$name" --nb201-table $D/nb201_draw.csv \
        --scores $D/scores/scores.csv
done
replay() {  # STAGE NAME TITLE: a stage's bench printed again from its committed runs.csv
    record "$1_$2" "$3" \
        genlab nas bench --config "$D/$1/$2/config.json" --records-from "$D/$1/$2/runs.csv" \
        --records-only --out "$R/$1_$2" --nb201-table "$TABLE"
}
for run in $D/stage2/*/; do
    [ -d "$run" ] || continue
    name=$(basename "${run%/}")
    replay stage2 "$name" "Stage 2, $name: method fidelity"
done
# stage 3, the court: its printed tables, the bench's own results file (each row's per-seed
# values, which the README's claims rows compare paired by seed) and its power
for run in $D/stage3/*/; do
    [ -d "$run" ] || continue
    name=$(basename "${run%/}")
    replay stage3 "$name" "Stage 3, $name: the court"
    cp "$R/stage3_$name/results.json" "docs/results/court_proxy_$name.json"
    record "stage3_${name}_power" "Stage 3, $name: the court's power from ber's seeds 0-4" \
        python experiments/nas_court_power.py "$D/stage3/$name/runs.csv" --pilot-seeds 0-4 \
        --seeds 10
done
record choice "The proxy choice, by the protocol's rule, from the committed files" \
    python experiments/nas_proxy_choice.py --docs $D --results docs/results/nas_proxy_choice_figures.json
python -m genlab.core.results
