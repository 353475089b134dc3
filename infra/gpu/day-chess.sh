#!/bin/bash
# One GPU call for chess's steady state over more than a million positions (issue #30, item 2):
# `../shared` holds 776,743 chess positions, so the Lichess testing split is repeated with each
# copy's Site id made unique (bench/speed/bench_ingest_dump.py's dump), ingested, and extracted with
# the value-net preset: eager, `--compile`, and `--cuda-graphs` (compiled nets replayed as CUDA
# graphs over padded batches). On a GPU it first runs the CUDA graphs' GPU test,
# tests/test_evaluator.py::test_cuda_graph_evaluator_matches_compiled_at_every_batch_size, which
# reads lc0's reference planes: the kit must carry them, and the call stops before any work when
# it does not. The first run on a fresh node also shows the driver's one compile of the numba
# encoders (`Extraction.compile_encoders`) in its `stage_s.encode`. Figures of its first call
# (28 November 2026, H200): docs/guide/gpu.md. Run from the repository root with `.gpu-kit/site-ray`,
# `site-run` and the chess `shared.tar.xz` carried, made by
#
#   bash infra/gpu/kit.sh --shared-only models/maia data/chess/lichess-2024-02-blitz/testing \
#       reference/maia-lc0-input-planes.json reference/maia-lc0-logits1858.npz
#
#   bash infra/gpu/day-chess.sh [GAMES] [MAX_GAMES]
#
# GAMES: games in the dump (default 19,196: the split twice, 2 × 705,285 positions);
# MAX_GAMES: extract only the first N (a check on a CPU). RUNS (environment): which of
# `eager compile graphs` to run (default all three; `graphs` needs a GPU). The summaries go to
# $OUT.
set -euo pipefail
games=${1:-19196}
max=${2:+--max-games $2}
OUT=${OUT:-out}
mkdir -p "$OUT"
source infra/gpu/env.sh
runs=${RUNS:-eager compile graphs}
if nvidia-smi -L 2>/dev/null; then
    for ref in maia-lc0-input-planes.json maia-lc0-logits1858.npz; do
        [ -f "$KIBITZ_SHARED_DIR/reference/$ref" ] || {
            echo "day-chess.sh: no reference/$ref in the kit: the CUDA graph test needs it (kit command: this script's header)"
            exit 2
        }
    done
    gpu=yes
else
    echo "no GPU: a check of the script only"
    gpu=no
    runs=${runs//graphs/}  # CUDA graphs: a GPU only (CPU evaluators refuse them)
fi
work=/tmp/kibitz-chess-day
mkdir -p $work
config=bench/configs/extract-chess-gpu-value-net.yaml
split=$KIBITZ_SHARED_DIR/data/chess/lichess-2024-02-blitz/testing
PYTHONPATH="bench/speed${PYTHONPATH:+:$PYTHONPATH}" python3 -c "
import sys
from pathlib import Path
from bench_ingest_dump import build_dump, load_games
build_dump(load_games(Path(sys.argv[1])), int(sys.argv[2]), Path(sys.argv[3]))" \
    "$split" "$games" $work/dump.pgn.zst
kibitz ingest chess $work/dump.pgn.zst --out $work/g --no-progress | tail -2
if [ $gpu = yes ]; then
    python3 -m pytest -q -p no:cacheprovider tests/test_evaluator.py -k cuda_graph 2>&1 | tail -15 \
        || echo "day-chess.sh: the CUDA graph tests did not all pass (above)"
fi
for run in $runs; do
    flag=$(case $run in compile) echo --compile ;; graphs) echo --cuda-graphs ;; esac)
    kibitz extract chess --games $work/g --out $work/f-$run --config $config $flag $max \
        --no-progress | tail -1
    cp $work/f-$run/_summary.json "$OUT/summary-chess-$run.json"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['this_run']; print(sys.argv[2], \
{k: r[k] for k in ('games', 'positions', 'wall_s', 'first_result_s', 'steady_positions_per_s', \
'net_s', 'stage_s')})" "$OUT/summary-chess-$run.json" "$run"
done
