#!/usr/bin/env bash
# Check an offline GPU node in one command (docs/gpu.md): scripts/gpu-node.sh OUTDIR [BUDGET_S] [gpu-check options]
#
# From the checkout, with the wheelhouse beside it (`make wheelhouse PYTHON_VERSION=<the node's>` on a machine with
# internet, then copy the checkout): installs the wheelhouse into a temporary folder (no index), then runs
# `tradeoff gpu-check` on PYTHONPATH=src under BUDGET_S seconds of wall clock in all (default 480), install
# included. The check writes its report (gpu-check-<device>.json and .md) into OUTDIR after every section; an outer
# `timeout` sends SIGTERM a little after the check's own budget, and the check then writes what it has. The node's
# Python: $PYTHON (default python3). The config: $TRADEOFF_CONFIG (files separated by ':'; default the paper's).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 OUTDIR [BUDGET_S] [gpu-check options]" >&2; exit 2; }
start=$SECONDS
out=$(mkdir -p "$1" && cd "$1" && pwd)
budget=${2:-480}
shift $(( $# >= 2 ? 2 : 1 ))
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
wheels=${WHEELHOUSE:-$root/.wheelhouse/py$version}
[ -d "$wheels" ] || { echo "no wheelhouse for Python $version in $wheels: make wheelhouse PYTHON_VERSION=$version" >&2; exit 2; }
site=$(mktemp -d "${TMPDIR:-/tmp}/tradeoff-node.XXXXXX")
trap 'rm -rf "$site"' EXIT
"$python" -m pip install --quiet --no-index --no-deps --disable-pip-version-check --no-compile \
    --find-links "$wheels" --target "$site" "$wheels"/*.whl
left=$(( budget - (SECONDS - start) - 10 ))   # 10 s: the outer timeout's grace and the report's last write
[ "$left" -gt 5 ] || { echo "no time left for the check after the install ($budget s budget)" >&2; exit 1; }
cd "$root"
status=0
PYTHONPATH="$site:$root/src${PYTHONPATH:+:$PYTHONPATH}" timeout --signal=TERM --kill-after=5 $(( left + 3 )) \
    "$python" -m tradeoff.cli gpu-check --budget "$left" --out "$out" "$@" || status=$?
ls "$out"/gpu-check-*.md >/dev/null 2>&1 || { echo "gpu-check wrote no report in $out (exit $status)" >&2; exit 1; }
echo "report: $(ls "$out"/gpu-check-*.md) (exit $status, $(( SECONDS - start )) s of $budget)"
exit "$status"
