#!/bin/bash
# One GPU call for the chess evaluator table's net rows (#65 item 4, docs/research/results.md,
# "The chess evaluator: what each buys"): the whole Lichess testing split ingested, then one
# loss-only extraction per config named (default: Maia-1900's and Maia-2200's value heads, FP16,
# batches of 4096), each aggregated and packed into $OUT. The loss columns of each replace the
# shipped model's in the same instances here, on the CPU:
#
#   python bench/accuracy/evaluator_table.py chess BASE --evaluator "Maia-1900 value head=agg-…"
#
# Run from the repository root with `.gpu-kit/site-ray`, `site-run` and a chess `shared.tar.xz`:
#
#   bash infra/gpu/kit.sh --shared-only models/maia/maia-1500.pb.gz models/maia/maia-1900.pb.gz \
#       models/maia/maia-2200.pb.gz data/chess/lichess-2024-02-blitz/testing
#   bash infra/gpu/day-chess-loss.sh [MAX_GAMES]     # MAX_GAMES: a check on a CPU
#
# CONFIGS (environment): the loss-only configs to run, in order.
set -uo pipefail
start=$SECONDS
max=${1:+--max-games $1}
OUT=${OUT:-out}
mkdir -p "$OUT"
source infra/gpu/env.sh
nvidia-smi -L 2>/dev/null || echo "no GPU: a check of the script only"
work=/tmp/kibitz-chess-loss
mkdir -p $work
configs=${CONFIGS:-bench/configs/extract-chess-loss-maia1900-value.yaml bench/configs/extract-chess-loss-maia2200-value.yaml}
kibitz ingest chess "$KIBITZ_SHARED_DIR/data/chess/lichess-2024-02-blitz/testing" --out $work/g \
    --no-progress | tail -2
echo "ingested at $((SECONDS - start)) s"
for config in $configs; do
    name=$(basename "$config" .yaml)
    kibitz extract chess --games $work/g --out $work/f-$name --config "$config" \
        --precision fp16 --batch-size 4096 $max --no-progress | tail -1 || continue
    kibitz aggregate --features $work/f-$name --out $work/agg-$name | tail -1
    tar -C $work -cf - agg-$name | xz -T0 -6 > "$OUT/agg-$name.tar.xz"
    cp $work/f-$name/_summary.json "$OUT/summary-$name.json"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['this_run']; print(sys.argv[2], \
{k: r.get(k) for k in ('games', 'positions', 'wall_s', 'first_result_s', 'steady_positions_per_s', \
'net_s', 'stage_s')})" "$OUT/summary-$name.json" "$name"
    echo "$name done at $((SECONDS - start)) s"
done
