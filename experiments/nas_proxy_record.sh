#!/bin/sh
# The tables of docs/nas_proxy.md, printed from the committed files alone and recorded as
# results files (docs/results/nas_proxy_*.json: the command, what it printed, the commit);
# `make results` then writes them into the page under their commands. Run from the
# repository's root after copying a stage's latest config.json and CSV into docs/nas_proxy/.
#
#     experiments/nas_proxy_record.sh
set -eu
D=docs/nas_proxy
R=runs/nas_proxy_record
rm -rf "$R"
record() {  # NAME TITLE, then the command
    name=$1
    title=$2
    shift 2
    python -m genlab.core.results --record "docs/results/nas_proxy_$name.json" --title "$title" -- "$@"
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
python -m genlab.core.results
