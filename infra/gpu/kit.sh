#!/usr/bin/env bash
# Build, here, what an air-gapped GPU machine needs beside the working tree (docs/guide/gpu.md, "A GPU day").
#
# The GPU machines Kibitz was measured on run Python 3.12 with PyTorch and the scientific
# stack (image-packages.txt) but not Ray, DuckDB, LightGBM, MLflow, python-chess…; they reach no
# package registry, and one command carries at most 64 MiB, the working tree included. So this
# resolves Kibitz's dependencies for CPython 3.12 on x86-64 Linux, keeps the ones the image
# lacks, installs them, leaves out what Kibitz never runs (Ray's Java jars, web UI, RLlib,
# Serve, Tune, Train, Data; MLflow's web UI; tests), strips the binaries' symbols and packs,
# each part small enough to travel beside the tree:
#
#   .gpu-kit/site-ray.tar.xz    Ray and its dependencies (extract runs on it)
#   .gpu-kit/site-run.tar.xz    the rest of ingest, extract, aggregate (DuckDB, python-chess, …)
#   .gpu-kit/site-train.tar.xz  what training adds (MLflow, LightGBM)
#   .gpu-kit/stockfish.xz       Debian's Stockfish binary (KIBITZ_STOCKFISH)
#   .gpu-kit/shared.tar.xz      the ../shared folders named on the command line (the nets and the
#                               data the work needs), with models/SHA256SUMS
#
#   bash infra/gpu/kit.sh models/katago data/go/fox-selected/testing data/go/fox-selected/by-player
#   bash infra/gpu/kit.sh --shared-only models/maia data/chess/lichess-2024-02-blitz/testing
#
# It prints each part's size. Upload the parts a command needs beside the checkout (in
# .gpu-kit/) and start the command with `source infra/gpu/env.sh`, which unpacks them on the
# machine and sets the paths and a `kibitz` command. What was unpacked stays while the machine
# is up, so parts that do not fit one upload go in back-to-back commands.
set -euo pipefail
cd "$(dirname "$0")/../.."

KIT=.gpu-kit
SHARED="${KIBITZ_SHARED_DIR:-$(cd .. && pwd)/shared}"
PY=(python3 -m pip)
PLATFORMS=()
for minor in 39 35 34 31 28 27 24 17; do PLATFORMS+=(--platform "manylinux_2_${minor}_x86_64"); done
TARGET=(--python-version 3.12 --implementation cp --only-binary=:all:
        "${PLATFORMS[@]}" --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
# Published as source only, pure Python: built into wheels here.
SOURCE_ONLY=(chess trueskill)

size() { du -h "$1" | cut -f1; }

shared_part() {
    for path in "$@"; do
        [ -e "$SHARED/$path" ] || { echo "kit.sh: no $SHARED/$path" >&2; exit 1; }
    done
    tar -C "$SHARED" -cf - models/SHA256SUMS "$@" | xz -T0 -6 > "$KIT/shared.tar.xz"
    echo "shared.tar.xz  $(size "$KIT/shared.tar.xz")  ($*)"
}

mkdir -p "$KIT"
if [ "${1:-}" = "--shared-only" ]; then
    shift
    shared_part "$@"
    exit 0
fi

# Kibitz's requirements that the image lacks, in three packs: Ray, the rest of what ingest,
# extract and aggregate run, and what training adds (MLflow, LightGBM). Ray has a pack of its
# own because Ray and the rest together (33.8 MiB) no longer fit one call beside the working
# tree (35.4 MiB since the Go policy on KataGo's trunk). Ray comes without its dashboard extras: a local
# or cluster Ray runs without them.
requirements() {  # $1: ray | run | train
    python3 - "$1" infra/gpu/image-packages.txt <<'EOF_PY'
import re, sys, tomllib
image = {l.strip() for l in open(sys.argv[2]) if l.strip() and not l.startswith("#")}
packs = {"ray": {"ray"}, "train": {"mlflow", "lightgbm"}}
def pack(name): return next((p for p, names in packs.items() if name in names), "run")
for dep in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]:
    name = re.sub(r"[-_.]+", "-", re.split(r"[\[<>=!~ ;]", dep, maxsplit=1)[0].lower())
    if name not in image and pack(name) == sys.argv[1]:
        print(re.sub(r"\[[^]]*\]", "", dep))
EOF_PY
}

# Download one pack's wheels with their dependencies, keep those neither the image nor an
# earlier pack holds, install them for Python 3.12, leave out what Kibitz never runs, strip the
# binaries' symbols and pack.
pack() {  # $1: ray | run | train; $2…: wheel files of earlier packs to leave out
    local part=$1 wheels="$KIT/wheels-$1" site="$KIT/site"
    shift
    rm -rf "$wheels" "$site" && mkdir -p "$wheels"
    mapfile -t wanted < <(requirements "$part")
    [ "$part" = run ] && "${PY[@]}" wheel -q --no-deps -w "$wheels" "${SOURCE_ONLY[@]}"
    "${PY[@]}" download -q "${TARGET[@]}" --find-links "$wheels" -d "$wheels" "${wanted[@]}"
    python3 - "$wheels" infra/gpu/image-packages.txt "$@" <<'EOF_PY'
import pathlib, re, sys
def name(path): return re.sub(r"[-_.]+", "-", pathlib.Path(path).name.split("-")[0].lower())
skip = {l.strip() for l in open(sys.argv[2]) if l.strip() and not l.startswith("#")}
skip |= {name(p) for p in sys.argv[3:]}
for wheel in pathlib.Path(sys.argv[1]).glob("*.whl"):
    if name(wheel) in skip:
        wheel.unlink()
EOF_PY
    "${PY[@]}" install -q --no-deps --no-compile --target "$site" "${TARGET[@]}" "$wheels"/*.whl
    rm -rf "$site"/ray/{jars,rllib,serve,tune,train,data,llm,dashboard/client} "$site/mlflow/server/js"
    find "$site" -depth -type d \( -name tests -o -name __pycache__ \) -exec rm -rf {} +
    find "$site" -type f \( -name "*.so" -o -perm -u+x \) -exec sh -c \
        'file -b "$1" | grep -q "^ELF" && strip --strip-unneeded "$1"' _ {} \;
    tar -C "$KIT" -cf - site | xz -T0 -9 > "$KIT/site-$part.tar.xz"  # -9: a sixth smaller than -6 here
    echo "site-$part.tar.xz  $(size "$KIT/site-$part.tar.xz")  ($(ls "$wheels" | cut -d- -f1 | tr '\n' ' '))"
    rm -rf "$site"
}

pack ray
pack run "$KIT"/wheels-ray/*.whl
pack train "$KIT"/wheels-ray/*.whl "$KIT"/wheels-run/*.whl
rm -rf "$KIT"/wheels-*

# Stockfish from Debian's package, unpacked here (the machine has no apt source).
work=$(mktemp -d)
(cd "$work" && apt-get download -q stockfish >/dev/null && dpkg -x stockfish_*.deb root)
xz -T0 -6 -c "$work/root/usr/games/stockfish" > "$KIT/stockfish.xz"
rm -rf "$work"
echo "stockfish.xz   $(size "$KIT/stockfish.xz")"

shared_part "$@"
echo "a call carries at most 64 MiB, the working tree ($(git ls-files -z | du -ch --files0-from=- | tail -1 | cut -f1)) included"
