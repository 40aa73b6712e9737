#!/bin/bash
# A real single-node SLURM 22.05 cluster for tests/test_slurm.py: Debian 12, as root, no systemd, no Docker.
#
#   tests/slurm/up.sh     start it (daemons already running are reused); prints `export SLURM_CONF=...`
#   tests/slurm/down.sh   stop what up.sh started, by PID (--purge also deletes its database and state)
#
# 1. installs the Debian packages if a command is missing (apt-get; no service is started by the install);
# 2. writes slurm.conf, gres.conf and slurmdbd.conf (from this folder) into $TRADEOFF_SLURM_RUN/etc;
# 3. starts munged (only if no munged answers), a private MariaDB (127.0.0.1:16306, its own datadir),
#    slurmdbd (16819), slurmctld (16817), slurmd (16818): their own ports, folders and PID files, so an
#    existing SLURM or MariaDB on the machine is not touched; clients find this cluster through SLURM_CONF;
# 4. waits until the node is idle and adds the account $TRADEOFF_SLURM_ACCOUNT for the current user.
# Every daemon it starts is appended to $TRADEOFF_SLURM_RUN/started ("name pidfile"): down.sh stops those.
# It links /etc/slurm/slurm.conf to its configuration if nothing is there (srun inside jobs reads that path).
# Logs: $TRADEOFF_SLURM_HOME/log/. Names and places: cluster.env.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=cluster.env
. "$HERE/cluster.env"
export SLURM_CONF PATH="$PATH:/usr/sbin:/sbin"
RUN=$TRADEOFF_SLURM_RUN
STATE=$TRADEOFF_SLURM_HOME
HOST=$(hostname -s)
USER_NAME=$(id -un)
MYSQL_SOCK=$RUN/mysql/mysqld.sock

say() { echo "slurm-harness: $*" >&2; }
die() { say "$*"; exit 1; }
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
started() { echo "$1 $2" >>"$RUN/started"; say "started $1 (pid $(cat "$2" 2>/dev/null || echo '?'))"; }
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local seconds=$1 what=$2; shift 2
    local end=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || die "timed out after ${seconds}s waiting for $what (logs: $STATE/log/)"
        sleep 0.3
    done
}

[ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts daemons)"

# 1. packages
missing=""
for cmd in slurmctld slurmd slurmdbd sbatch sacct sacctmgr munged munge mariadbd mariadb-install-db mysqladmin; do
    command -v "$cmd" >/dev/null || missing="$missing $cmd"
done
if [ -n "$missing" ]; then
    command -v apt-get >/dev/null || die "missing:$missing, and no apt-get to install them"
    say "missing:$missing; installing slurmctld slurmd slurm-client slurmdbd munge mariadb-server"
    policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then  # keep the packages' init scripts from starting services
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && policy=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    rc=0
    { apt-get update -q && apt-get install -y -q slurmctld slurmd slurm-client slurmdbd munge mariadb-server; } >&2 || rc=$?
    [ -z "$policy" ] || rm -f /usr/sbin/policy-rc.d
    [ $rc = 0 ] || die "apt-get failed ($rc)"
fi

# 2. configuration
mkdir -p "$RUN/etc" "$RUN/mysql" "$STATE/ctld" "$STATE/d" "$STATE/log" "$STATE/mysql"
chmod 755 "$RUN"
touch "$RUN/started"
for f in slurm.conf gres.conf slurmdbd.conf; do
    sed -e "s|@HOST@|$HOST|g; s|@RUN@|$RUN|g; s|@HOME@|$STATE|g" \
        -e "s|@PARTITION@|$TRADEOFF_SLURM_PARTITION|g; s|@GPUS@|$TRADEOFF_SLURM_GPUS|g; s|@LASTGPU@|$((TRADEOFF_SLURM_GPUS - 1))|g" \
        "$HERE/$f" >"$RUN/etc/$f.new"
    mv "$RUN/etc/$f.new" "$RUN/etc/$f"
done
chmod 644 "$RUN/etc/slurm.conf" "$RUN/etc/gres.conf"
chmod 600 "$RUN/etc/slurmdbd.conf"
for i in $(seq 0 $((TRADEOFF_SLURM_GPUS - 1))); do  # the fake GPUs' device files (gres.conf)
    [ -e "$RUN/fakegpu$i" ] || mknod -m 666 "$RUN/fakegpu$i" c 1 3 2>/dev/null || touch "$RUN/fakegpu$i"
done

# Clients inside jobs need the configuration at the default path too: the Snakemake jobstep plugin drops every
# SLURM_* variable (SLURM_CONF included) before it calls srun. A link there, unless another SLURM owns it.
ETC_CONF=/etc/slurm/slurm.conf
if [ -L "$ETC_CONF" ] && [ "$(readlink "$ETC_CONF")" = "$SLURM_CONF" ]; then
    :
elif [ -e "$ETC_CONF" ] || [ -L "$ETC_CONF" ]; then
    die "$ETC_CONF exists and is not this harness's: a SLURM is configured on this machine; not touching it"
else
    mkdir -p /etc/slurm && ln -s "$SLURM_CONF" "$ETC_CONF"
    echo "link $ETC_CONF" >>"$RUN/started"
fi

# 3a. munge (shared with anything else on the machine that uses it)
if ! (munge -n | unmunge) >/dev/null 2>&1; then
    [ -s /etc/munge/munge.key ] || { mungekey --create --keyfile=/etc/munge/munge.key && chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key; }
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    runuser -u munge -- /usr/sbin/munged
    wait_for 20 munged sh -c 'munge -n | unmunge'
    started munged /run/munge/munged.pid
fi

# 3b. MariaDB for the accounting database, private to this harness
if ! alive "$RUN/mysql/mysqld.pid"; then
    chown mysql:mysql "$RUN/mysql" "$STATE/mysql"
    if [ ! -d "$STATE/mysql/mysql" ]; then
        mariadb-install-db --no-defaults --user=mysql --datadir="$STATE/mysql" --skip-test-db \
            >"$STATE/log/mariadb-install.log" 2>&1 || die "mariadb-install-db failed: $STATE/log/mariadb-install.log"
    fi
    setsid /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$STATE/mysql" --bind-address=127.0.0.1 \
        --port=16306 --socket="$MYSQL_SOCK" --pid-file="$RUN/mysql/mysqld.pid" \
        --log-error="$STATE/mysql/mariadb.err" </dev/null >/dev/null 2>&1 &
    wait_for 60 MariaDB mysqladmin --no-defaults --socket="$MYSQL_SOCK" ping
    wait_for 10 "MariaDB pid file" test -s "$RUN/mysql/mysqld.pid"
    started mariadbd "$RUN/mysql/mysqld.pid"
fi
mysql --no-defaults --socket="$MYSQL_SOCK" -e "
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmpw';
    CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';
    GRANT ALL ON tradeoff_slurm_acct_db.* TO 'slurm'@'localhost';
    GRANT ALL ON tradeoff_slurm_acct_db.* TO 'slurm'@'127.0.0.1';"

# 3c. slurmdbd, then the controller, then the node daemon
if ! alive "$RUN/slurmdbd.pid"; then
    /usr/sbin/slurmdbd
    wait_for 60 slurmdbd sacctmgr -n list cluster
    started slurmdbd "$RUN/slurmdbd.pid"
fi
sacctmgr -i add cluster tradeoffci >/dev/null 2>&1 || true
if ! alive "$RUN/slurmctld.pid"; then
    /usr/sbin/slurmctld
    wait_for 60 slurmctld scontrol ping
    started slurmctld "$RUN/slurmctld.pid"
fi
if ! alive "$RUN/slurmd.pid"; then
    /usr/sbin/slurmd
    wait_for 10 "slurmd pid file" test -s "$RUN/slurmd.pid"
    started slurmd "$RUN/slurmd.pid"
fi
node_ready() { sinfo -h -n "$HOST" -o %T | grep -Eq '^(idle|mixed|allocated)'; }
if ! (wait_for 30 "node $HOST" node_ready) 2>/dev/null; then
    scontrol update nodename="$HOST" state=resume 2>/dev/null || true  # down or drained by an earlier run
    wait_for 30 "node $HOST to be idle" node_ready
fi

# 4. the account that the tests' profile charges
sacctmgr -i add account "$TRADEOFF_SLURM_ACCOUNT" Description=tradeoff-tests Organization=tradeoff >/dev/null 2>&1 || true
sacctmgr -i add user "$USER_NAME" account="$TRADEOFF_SLURM_ACCOUNT" >/dev/null 2>&1 || true
sacctmgr -n -s list user "$USER_NAME" format=account%64 | grep -qw -- "$TRADEOFF_SLURM_ACCOUNT" \
    || die "account $TRADEOFF_SLURM_ACCOUNT is not associated with $USER_NAME"

sinfo >&2
echo "export SLURM_CONF=$SLURM_CONF"
