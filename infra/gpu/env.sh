# Source on the GPU machine, from the repository root, with the parts of `.gpu-kit` the call
# needs carried (infra/gpu/kit.sh builds them here; docs/guide/gpu.md, "A GPU day"):
#
#   source infra/gpu/env.sh && kibitz extract go --games games --out features
#
# Unpacks what the call carried into /tmp/kibitz-kit: each package part once per machine (it
# stays while the machine is warm, so parts can come in back-to-back calls), Stockfish, and the
# ../shared folders every time (each call may bring others). Then puts the packages and this
# checkout on PYTHONPATH (Ray's workers inherit it), points KIBITZ_SHARED_DIR and
# KIBITZ_STOCKFISH there, and defines `kibitz` (the checkout is not pip-installed there).
KIBITZ_KIT=/tmp/kibitz-kit
mkdir -p "$KIBITZ_KIT/shared"
for part in .gpu-kit/site-*.tar.xz; do
    [ -f "$part" ] && [ ! -f "$KIBITZ_KIT/$(basename "$part").done" ] || continue
    tar -xJf "$part" -C "$KIBITZ_KIT" && touch "$KIBITZ_KIT/$(basename "$part").done"
done
if [ -f .gpu-kit/shared.tar.xz ]; then
    tar -xJf .gpu-kit/shared.tar.xz -C "$KIBITZ_KIT/shared"
fi
if [ -f .gpu-kit/stockfish.xz ] && [ ! -x "$KIBITZ_KIT/stockfish" ]; then
    xz -dc .gpu-kit/stockfish.xz > "$KIBITZ_KIT/stockfish" && chmod 755 "$KIBITZ_KIT/stockfish"
fi
echo "infra/gpu/env.sh: unpacked $(cd "$KIBITZ_KIT" && ls -d ./*.done stockfish shared/* shared/data/*/* 2>/dev/null | tr '\n' ' ')"
export PYTHONPATH="$KIBITZ_KIT/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$KIBITZ_KIT/site/bin:$PATH"
export KIBITZ_SHARED_DIR="$KIBITZ_KIT/shared" KIBITZ_STOCKFISH="$KIBITZ_KIT/stockfish"
kibitz() { python3 -m pipeline.cli.main "$@"; }
export -f kibitz
