# scripts/slurm/env.sh: what every job of the SLURM recipe needs (sourced by cpu.sbatch, gpu.sbatch, final.sbatch).
# Edit the paths for your site, or export them before `scripts/slurm/submit.sh` (sbatch passes the environment on:
# a value set there wins over the defaults below).
set -euo pipefail

# The repository, on a filesystem every node mounts at the same path (submit from its root: SLURM_SUBMIT_DIR).
REPO=${SENTLAB_REPO:-$SLURM_SUBMIT_DIR}
cd "$REPO"
: "${PROFILE:?PROFILE is not set: submit with PROFILE=<profile> scripts/slurm/submit.sh (profiles/*.yaml)}"
source "${SENTLAB_VENV:-$REPO/.venv}/bin/activate"       # the same venv on every node
export SENTLAB_DATA_MIRROR=${SENTLAB_DATA_MIRROR:-$REPO/../shared/data}   # wiki1m, SentEval, ... (sentlab fetch)
export NLTK_DATA=${NLTK_DATA:-$REPO/../shared/nltk_data}
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}                 # models fetched once beforehand (HF_HOME on every node)
export TOKENIZERS_PARALLELISM=false
export RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0     # the same on head, workers and driver

say() { echo "[$(date +%H:%M:%S) ${SLURM_JOB_NAME:-sentlab} job ${SLURM_JOB_ID:-?}${SLURM_RESTART_COUNT:+ restart $SLURM_RESTART_COUNT}] $*"; }

# the profile this workspace runs: params.yaml and models.yaml from profiles/$PROFILE.yaml (kept as they are when
# they are that profile already, hand edits included); a fresh clone is `quick`
sentlab profile "$PROFILE"
