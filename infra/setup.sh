#!/usr/bin/env bash
# Set-up of a Kibitz checkout: the system packages the tests need, then PyTorch, then the
# project with its test extras. The README's set-up and CI (.ci/run) both run this file, so a
# new user and CI install the same things. Safe to re-run: each step skips what is present.
#
#   infra/setup.sh            # from the repository root (any folder works)
#
# System packages (apt-get, with sudo when not root; elsewhere install them yourself):
#   stockfish   - the chess evaluator (`stockfish` on PATH, or KIBITZ_STOCKFISH)
#   p7zip-full  - `7z`, the reference the Fox .7z archive reader is checked against
#   zstd, curl  - `zstdcat` and `curl`, which the README's `kibitz serve` example runs
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(stockfish p7zip-full zstd curl)
NEEDED_COMMANDS=(stockfish 7z zstdcat curl)  # what the tests and README run; keep in sync

missing=()
for cmd in "${NEEDED_COMMANDS[@]}"; do
    command -v "$cmd" >/dev/null || [ -x "/usr/games/$cmd" ] || missing+=("$cmd")
done
if [ "${#missing[@]}" -gt 0 ]; then
    if command -v apt-get >/dev/null; then
        sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        export DEBIAN_FRONTEND=noninteractive
        $sudo apt-get update -qq
        $sudo apt-get install -y -qq --no-install-recommends "${APT_PACKAGES[@]}" >/dev/null
    else
        echo "infra/setup.sh: no apt-get here; install ${APT_PACKAGES[*]} (commands: ${missing[*]}) with your package manager" >&2
        exit 1
    fi
fi

# PyTorch first: the CPU build pyproject.toml's range is tested with; then the project.
python3 -m pip install -q torch==2.13.0
python3 -m pip install -q -e '.[test]'
