#!/bin/bash
# The SLURM recipe (docs/slurm.md): three jobs, each waiting for the one before it (--dependency=afterok):
#   1. cpu.sbatch    the profile, then sources, prepare, annotate on CPUs
#   2. gpu.sbatch    a Ray cluster over NODES nodes of GPUS_PER_NODE GPUs, every model's chain on it; requeued at
#                    its time limit, its trainings resuming from their checkpoints
#   3. final.sbatch  restore (from DVC's run cache), report, export on CPUs
# Run from the repository's root (a filesystem every node mounts at the same path):
#   PROFILE=paper NODES=4 GPUS_PER_NODE=8 CPUS_PER_NODE=32 TIME=48:00:00 scripts/slurm/submit.sh [sbatch options]
# Extra arguments (a partition, an account: -p gpu -A proj) go to every sbatch. GPUS_PER_NODE=0: CPU tasks (the
# local one-node SLURM of scripts/local_slurm.sh). CPU_JOB_CPUS: the CPU jobs' CPUs (16); SIGNAL_S: seconds before
# the GPU job's time limit at which it stops, checkpoints and requeues (300). Prints the three job ids.
set -euo pipefail
: "${PROFILE:?PROFILE=<profile> scripts/slurm/submit.sh (profiles/*.yaml)}"
export PROFILE
NODES=${NODES:-1}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_NODE=${CPUS_PER_NODE:-32}
TIME=${TIME:-48:00:00}
here=$(dirname "$0")
cpu_args=(--cpus-per-task="${CPU_JOB_CPUS:-16}")
gpu_args=(--nodes="$NODES" --cpus-per-task="$CPUS_PER_NODE" --time="$TIME" --signal=B:TERM@"${SIGNAL_S:-300}")
(( GPUS_PER_NODE > 0 )) && gpu_args+=(--gpus-per-node="$GPUS_PER_NODE")
cpu=$(sbatch --parsable "$@" "${cpu_args[@]}" "$here/cpu.sbatch")
gpu=$(sbatch --parsable "$@" "${gpu_args[@]}" --dependency=afterok:"$cpu" "$here/gpu.sbatch")
final=$(sbatch --parsable "$@" "${cpu_args[@]}" --dependency=afterok:"$gpu" --kill-on-invalid-dep=yes \
    "$here/final.sbatch")
echo "$cpu $gpu $final"
