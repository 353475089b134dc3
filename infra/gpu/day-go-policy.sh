#!/bin/bash
# One GPU call for issue #28 item 1: kibitz-go-policy (KataGo g170's trunk with the rank head:
# trained on CPUs, then 2,000 steps of 256 on an H200 on 28 November as kibitz-go-policy-gpu,
# rank layers refit, then on a CPU as the student of its own eight symmetries; 1,945,280
# training positions in all, docs/research/log-nets.md) trained further on the GPU, trunk and head together, then scored held out against the net it started from on the
# same moves (bench/accuracy/go_policy_held_out.py --against, 16 moves per player instance of the testing
# evaluation split and of candidating/: at 4 a column's own-group margin was within its noise;
# the gain paired, since each net's own figure carries ± 0.20 points there and the gain's
# ± 0.07–0.09, docs/research/log-nets.md). Run from the repository root with site-ray, site-run, site-train and
# `bash infra/gpu/kit.sh --shared-only models/katago data/go/fox-selected/testing
# data/go/fox-selected/by-player data/go/fox-selected/candidating` carried (docs/guide/gpu.md gives
# the tree and the sizes):
#
#   bash infra/gpu/day-go-policy.sh [SECONDS] [STEPS] [BATCH] [MAX_TRAIN_GAMES]
#
# SECONDS: the call's budget (default 540); STEPS × BATCH: the run's length (default 4000 × 256,
# 1,024,000 positions: a whole cosine schedule; the H200 trained 9,838 positions/s, so the
# training is under 2 minutes and the ingest, the pools' encoding and the scoring take the rest
# of the call); MAX_TRAIN_GAMES: fewer training games (28 November: 12,000 of 16,112, to fit a
# second call's leftover time), or a check on a CPU.
# TRAIN_OPTS (environment): more `kibitz train policy` options, e.g.
# TRAIN_OPTS=--random-symmetries (docs/research/log-nets.md: trained on random symmetries) or
# TRAIN_OPTS="--teacher-symmetries 8 --teacher-weight 0.7" (docs/research/log-nets.md: a student of two symmetries),
# with --precision bf16 to run each step's forward in bfloat16 (docs/research/log-nets.md: training at bfloat16;
# 1.73× on this project's CPU, not yet measured on a GPU).
# Training stops in time to leave 170 s for scoring and packing. Back in $OUT: the model, its
# card and ONNX, the checkpoint (carry it as .gpu-kit/go-policy-last.pt and the next call
# resumes: same command, `--resume`), the held-out scores (one orientation with the paired gain
# over the start net, then averaged over the board's 8 symmetries: one file, held-out.txt), the
# training log and when each stage ended (times.txt): 8 files, the most a call brings back.
set -uo pipefail
budget=${1:-540}
steps=${2:-4000}
batch=${3:-256}
max_games=${4:+--max-train-games $4}
start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }
OUT=${OUT:-out}
mkdir -p "$OUT"
source infra/gpu/env.sh
nvidia-smi -L 2>/dev/null || echo "no GPU: a check of the script only"
device=$(python3 -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")
work=/tmp/kibitz-policy-day
run=$work/policy
mkdir -p $work
fox=$KIBITZ_SHARED_DIR/data/go/fox-selected
[ -d $work/games ] || kibitz ingest go $fox/testing $fox/by-player --out $work/games \
    --no-progress | tail -2
echo "ingested at $((SECONDS - start)) s" | tee -a "$OUT/times.txt"
resume=""
if [ -f .gpu-kit/go-policy-last.pt ] && [ ! -f $run/checkpoints/last.pt ]; then
    mkdir -p $run/checkpoints && cp .gpu-kit/go-policy-last.pt $run/checkpoints/last.pt
fi
[ -f $run/checkpoints/last.pt ] && resume=--resume
minutes=$(python3 -c "print(round(max(1.0, ($(left) - 170) / 60), 2))")
kibitz train policy go --games $work/games --out $run --init-from kibitz-go-policy \
    --trunk katago-g170-b6c96 --trunk-mode finetune --trunk-lr-scale 0.2 --lr 0.0007 \
    --batch-size "$batch" --max-steps "$steps" --epoch-steps 500 --max-minutes "$minutes" \
    --max-validation-games 100 --max-evaluation-games 200 --evaluation-positions 16 \
    --device "$device" --seed 3 --no-progress --tracking-uri "sqlite:///$work/mlflow.db" \
    $max_games $resume ${TRAIN_OPTS:-} 2>&1 | grep -v "^\s*$" | tail -40 | tee "$OUT/train.log"
echo "trained at $((SECONDS - start)) s" | tee -a "$OUT/times.txt"
cp $run/model.kibitz.pt $run/model.yaml $run/MODEL_CARD.md $run/model.onnx "$OUT/"
cp $run/checkpoints/last.pt "$OUT/go-policy-last.pt"
python3 bench/accuracy/go_policy_held_out.py --model $run/model.kibitz.pt --positions 16 \
    --against kibitz-go-policy --device "$device" | tee -a "$OUT/held-out.txt"
echo "scored at $((SECONDS - start)) s" | tee -a "$OUT/times.txt"
# The same moves with the features averaged over the board's 8 symmetries (8 trunk passes a
# move; docs/research/log-nets.md: four gave kibitz-go-policy-next +0.77 points, 34 millinats a move).
if [ "$(left)" -gt 60 ]; then
    python3 bench/accuracy/go_policy_held_out.py --model $run/model.kibitz.pt --positions 16 \
        --symmetries 8 --device "$device" | tee -a "$OUT/held-out.txt"
fi
echo "all done at $((SECONDS - start)) s" | tee -a "$OUT/times.txt"
