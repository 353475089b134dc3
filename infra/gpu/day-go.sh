#!/bin/bash
# One GPU call for the Go work (docs/guide/gpu.md, "A GPU day"): the Fox testing and by-player splits
# extracted whole at BF16 (the shipped kibitz-meta-go's number format), each aggregated, then
# the PyTorch engines benchmark. Run from the repository root with the parts of `.gpu-kit` the
# call needs carried (site-ray, site-run, a shared.tar.xz with KataGo, the two Fox splits,
# maia-1500 and the reference inputs):
#
#   bash infra/gpu/day-go.sh [SECONDS]      # SECONDS: the call's budget (default 540)
#   CONFIG=bench/configs/extract-go-4x32-levels.yaml bash infra/gpu/day-go.sh   # other levels
#
# CONFIG: the extraction config (default bench/configs/extract-go-gpu.yaml, the preset on a GPU); a
# config with other levels under the preset's column names gives aggregates that compare with
# the shipped ones column for column (bench/accuracy/meta_compare.py, #28).
#
# Everything that must outlast the machine goes to $OUT: each split's aggregates (tar.xz), its
# extraction summary (the steady rate with start-up excluded, stage seconds) and the benchmark.
# Each step gets the time left: the by-player split takes as many games as the testing split's
# steady rate says fit (`--max-games`), so the aggregates of what ran always come back.
set -uo pipefail
budget=${1:-540}
start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }
OUT=${OUT:-out}
mkdir -p "$OUT"
source infra/gpu/env.sh
nvidia-smi -L
work=/tmp/kibitz-day
mkdir -p $work
config=${CONFIG:-bench/configs/extract-go-gpu.yaml}
fox=$KIBITZ_SHARED_DIR/data/go/fox-selected

pack() {  # aggregates folder → $OUT/agg-NAME.tar.xz.aa, .ab (a file comes back if ≤ 16 MiB)
    local name=$1
    kibitz aggregate --features $work/f-$name --out $work/agg-$name
    tar -C $work -cf - agg-$name | xz -T0 -6 | split -b 15m - "$OUT/agg-$name.tar.xz."
    cp $work/f-$name/_summary.json "$OUT/summary-$name.json"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['this_run']; print(sys.argv[2], \
{k: r[k] for k in ('games', 'positions', 'wall_s', 'positions_per_s', 'first_result_s', \
'steady_positions_per_s', 'stage_s', 'net_s')})" "$OUT/summary-$name.json" "$name"
}

for name in testing by-player; do
    kibitz ingest go $fox/$name --out $work/g-$name --no-progress | tail -3
done
echo "ingested at $((SECONDS - start)) s"

kibitz extract go --games $work/g-testing --out $work/f-testing --config $config \
    --precision bf16 --no-progress && pack testing
echo "testing done at $((SECONDS - start)) s"

# by-player: as many games as fit in the time left, keeping 150 s for the benchmark and
# 60 s for start-up, aggregation and packing (rate: the testing run's steady positions/s)
games=$(python3 -c "
import json, sys
r = json.load(open('$work/f-testing/_summary.json'))['this_run']
per_game = r['positions'] / r['games']
print(max(0, int((int(sys.argv[1]) - 210) * r['steady_positions_per_s'] / per_game)))" "$(left)")
echo "by-player: up to $games games"
if [ "$games" -gt 100 ]; then
    kibitz extract go --games $work/g-by-player --out $work/f-by-player --config $config \
        --precision bf16 --no-progress --max-games "$games" && pack by-player
fi
echo "by-player done at $((SECONDS - start)) s"

t=$(left)
[ "$t" -gt 30 ] && timeout $((t - 10)) python3 bench/gpu/bench_gpu_engines.py 2>&1 \
    | grep -v Warning | tee "$OUT/engines.txt"
echo "all done at $((SECONDS - start)) s"
