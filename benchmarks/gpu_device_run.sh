#!/bin/bash
# The GPU checklist (benchmarks/gpu_checklist.py) on a bare GPU machine that reaches no registry; outputs under $OUT.
# Beside the checkout (git-ignored): .whl/ = CPython 3.12 manylinux wheels of what sentlab imports and the machine
# lacks (dvc, mlflow, pydantic, nltk, rake-nltk, ruamel.yaml ... with their dependencies; `pip download --no-deps
# --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 ...`, 47 MB on 2026-11-26) and
# .gpu/data.tar.xz = mirror/{STS,SICK,wiki}, mirror/models/sentence-transformers/all-MiniLM-L6-v2/{config,
# tokenizer files, vocab.txt} (the bert-base tokenizer is rebuilt from its vocabulary) and nltk_data/.
# Env: PARTS (default every part), STAGES (the preflight's training stages), PF_TIMEOUT (seconds).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1 || { tail -5 $OUT/pip.log; }
mkdir -p /tmp/m && tar -C /tmp/m -xJf .gpu/data.tar.xz
export PYTHONPATH=$PWD/src:/tmp/site SENTLAB_DATA_MIRROR=/tmp/m/mirror NLTK_DATA=/tmp/m/nltk_data HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
git init -q . 2>/dev/null; printf '/.whl/\n/.gpu/\n' >> .git/info/exclude; git add -A >/dev/null 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python3 -c "import dvc.api, mlflow, pydantic, nltk, ruamel.yaml, transformers, torch; import sentlab.cli; print('imports ok', transformers.__version__, torch.__version__)" 2>&1 | tail -3
STAGES=${STAGES:-'^train@(simcse|ct|moco|ptbert|paser|paser_sup|l2p|prompt_l2p|posbow_adv|simcse_sup|moco_srl|prompt)$'}
timeout 500 python3 benchmarks/gpu_checklist.py --out $OUT --parts ${PARTS:-env,train,eval,preflight} --steps 20 --stages "$STAGES" --preflight-timeout ${PF_TIMEOUT:-300} 2>&1 | tee $OUT/checklist.log | grep -v '"tail"' | cut -c1-400
tar -czf $OUT/stage_logs.tgz -C /tmp/sentlab-gpu-preflight/.preflight logs 2>/dev/null
ls $OUT
