#!/bin/bash
# A one-node SLURM on 127.0.0.1 for trying the SLURM recipe (scripts/slurm/, docs/slurm.md) on this machine.
#
#   scripts/local_slurm.sh start    # munged + slurmctld + slurmd as root, config and state in $SLURM_LOCAL_DIR
#   export SLURM_CONF=$SLURM_LOCAL_DIR/slurm.conf   # (start prints it) then sbatch / squeue / scontrol as usual
#   scripts/local_slurm.sh status   # sinfo and the queue
#   scripts/local_slurm.sh stop     # ends the three daemons this script started (by their pid files)
#
# Needs root and Debian's packages: apt-get install -y slurm-wlm munge (Slurm 22.05 on Debian 12). The node is
# this machine with the CPUs and memory `slurmd -C` detects, one partition `local`, requeue allowed (JobRequeue=1),
# no cgroups (proctrack/linuxproc, task/affinity: CPU binding without a cgroup to delegate), no accounting. Nothing is written
# outside $SLURM_LOCAL_DIR (default /tmp/sentlab-slurm): its own munge key and socket, slurm.conf, state, logs.
set -euo pipefail

DIR=${SLURM_LOCAL_DIR:-/tmp/sentlab-slurm}
cmd=${1:-}

need() {
    for b in munged slurmctld slurmd sbatch; do
        command -v "$b" >/dev/null || { echo "local_slurm.sh: $b not found: apt-get install -y slurm-wlm munge" >&2; exit 2; }
    done
    [ "$(id -u)" = 0 ] || { echo "local_slurm.sh: runs the daemons as root: run it as root (sudo)" >&2; exit 2; }
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
    need
    mkdir -p "$DIR"/{ctld,spool,munge,log}
    chmod 700 "$DIR/munge"
    if alive "$DIR/slurmctld.pid"; then
        echo "local_slurm.sh: already running ($DIR); export SLURM_CONF=$DIR/slurm.conf"
        return 0
    fi
    [ -f "$DIR/munge/munge.key" ] || { dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1 count=1024 status=none;
                                       chmod 400 "$DIR/munge/munge.key"; }
    munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
           --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/seed"
    local node; node=$(slurmd -C | head -1)   # NodeName=<host> CPUs=... RealMemory=...
    cat > "$DIR/slurm.conf" <<EOF
# written by scripts/local_slurm.sh: one node, this machine, on 127.0.0.1
ClusterName=sentlab-local
SlurmctldHost=$(hostname -s)(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
SlurmUser=root
SlurmdUser=root
SlurmctldPort=${SLURM_LOCAL_PORT:-6817}
SlurmdPort=$(( ${SLURM_LOCAL_PORT:-6817} + 1 ))
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
JobRequeue=1
KillWait=60
MinJobAge=3600
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    export SLURM_CONF=$DIR/slurm.conf
    slurmctld -f "$SLURM_CONF"
    slurmd -f "$SLURM_CONF"
    for _ in $(seq 60); do
        if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
            echo "local_slurm.sh: running ($(sinfo -h -o '%N %c CPUs %m MB %T')); export SLURM_CONF=$SLURM_CONF"
            return 0
        fi
        sleep 1
    done
    echo "local_slurm.sh: the node did not come up in 60 s; logs in $DIR/log" >&2
    tail -5 "$DIR"/log/*.log >&2
    exit 1
}

stop() {
    for p in slurmd slurmctld munge/munged; do
        if alive "$DIR/$p.pid"; then
            kill "$(cat "$DIR/$p.pid")"
            for _ in $(seq 30); do alive "$DIR/$p.pid" || break; sleep 1; done
            echo "local_slurm.sh: stopped ${p#munge/}"
        fi
    done
}

case "$cmd" in
    start) start ;;
    stop) stop ;;
    status) export SLURM_CONF=$DIR/slurm.conf; sinfo; squeue ;;
    *) echo "usage: scripts/local_slurm.sh start|stop|status (state in \$SLURM_LOCAL_DIR, default /tmp/sentlab-slurm)" >&2
       exit 2 ;;
esac
