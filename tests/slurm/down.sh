#!/bin/bash
# Stop the daemons that tests/slurm/up.sh started (listed in $TRADEOFF_SLURM_RUN/started), newest first, by PID.
#   tests/slurm/down.sh           stop them; the accounting database and SLURM state are kept (faster next start)
#   tests/slurm/down.sh --purge   stop them and delete $TRADEOFF_SLURM_HOME and $TRADEOFF_SLURM_RUN
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=cluster.env
. "$HERE/cluster.env"
RUN=$TRADEOFF_SLURM_RUN

if [ -s "$RUN/started" ]; then
    tac "$RUN/started" | while read -r name pidfile; do
        if [ "$name" = link ]; then  # the /etc/slurm/slurm.conf link to this cluster's configuration
            [ -L "$pidfile" ] && [ "$(readlink "$pidfile")" = "$SLURM_CONF" ] && rm -f "$pidfile"
            continue
        fi
        [ -s "$pidfile" ] || continue
        pid=$(cat "$pidfile")
        kill "$pid" 2>/dev/null || continue
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then
            kill -9 "$pid" 2>/dev/null
            echo "slurm-harness: killed $name (pid $pid) after 20 s" >&2
        else
            echo "slurm-harness: stopped $name (pid $pid)" >&2
        fi
    done
fi
rm -f "$RUN/started"
if [ "${1:-}" = "--purge" ]; then
    rm -rf "$TRADEOFF_SLURM_HOME" "$RUN"
fi
exit 0
