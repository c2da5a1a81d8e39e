# sentlab — the two commands:  `make repro` (pipeline, quick profile)  and  `make test`.
PROFILE ?= quick
JOBS    ?= 1
VENV    ?= .venv
PY      := $(VENV)/bin/python
SHARED  ?= $(abspath ../shared)

# The offline mirror and NLTK data beside the checkout are used when present;
# an explicit SENTLAB_DATA_MIRROR / NLTK_DATA in the environment wins.
ifneq ($(wildcard $(SHARED)/data),)
export SENTLAB_DATA_MIRROR ?= $(SHARED)/data
endif
ifneq ($(wildcard $(SHARED)/nltk_data),)
export NLTK_DATA ?= $(SHARED)/nltk_data
endif
# Stage commands (`python pipeline/...`) run with the venv's python.
export PATH := $(abspath $(VENV))/bin:$(PATH)
export HF_HUB_DISABLE_TELEMETRY = 1
export TOKENIZERS_PARALLELISM = false

.PHONY: env lock lock-check repro status test smoke clean-env bench mlflow-ui preflight

env: $(VENV)/.installed

# torch first: TORCH_SPEC (default torch==2.13.0: the CPU build on this project's machines, which find it on disk;
# from the public index the CUDA 13 build, which needs an NVIDIA driver >= 580: a GPU node names the build its
# driver runs, README "Install"). A CUDA torch already in the venv is kept, unless TORCH_SPEC is given; another
# torch for an existing venv: `make clean-env env TORCH_SPEC=...` (env is done once .venv/.installed is current).
# Then exactly requirements/lock.txt (every other package, the test and ray extras included, checked against its
# hashes, nothing resolved), sentlab itself, and `pip check`. `make lock` re-resolves the lock.
TORCH_SPEC ?= torch==2.13.0
UV_SPEC    ?= uv==0.13.9
$(VENV)/.installed: requirements/lock.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) scripts/lock.py keep-torch "$(TORCH_SPEC)" $(if $(filter command line environment,$(origin TORCH_SPEC)),--explicit) \
	  || $(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q --require-hashes --no-deps -r requirements/lock.txt
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m pip check
	touch $@

# requirements/lock.txt re-resolved from pyproject.toml and requirements/pins.txt (uv; then make env, make test and
# the quick profile decide whether it lands); lock-check: what the newest releases would move, the lock untouched
lock: env
	$(PY) -m pip install -q "$(UV_SPEC)"
	$(PY) scripts/lock.py write

lock-check: env
	$(PY) -m pip install -q "$(UV_SPEC)"
	$(PY) scripts/lock.py check

# params.yaml from profiles/$(PROFILE).yaml (kept as it is when it is that profile already, hand edits included;
# FORCE=1 switches profiles over hand edits) and its stage list (models.yaml). A parent MLflow run groups the
# runs of one pipeline run (SENTLAB_PARENT_RUN_ID).
# TABLE=ID[,ID]: only the stages that fill those paper tables (ids: `sentlab plan`), then the report from what
# exists; widening later (another TABLE, or none) re-runs nothing already done.
# JOBS=N (N > 1): the independent stages (each model's train -> evaluate) in parallel on Ray, N at a time
# (sentlab run, docs/scale-ray.md; installs the `ray` extra); ADDRESS=host:port joins an existing Ray cluster.
# `sentlab repro` writes the profile and runs the pipeline under one workspace lock (sentlab.cli.repro): a
# second make repro here is refused while it runs, so params.yaml is never rewritten under a running pipeline.
repro: env
ifneq ($(filter-out 0 1,$(JOBS))$(ADDRESS),)
	$(PY) -c "import ray" 2>/dev/null || $(PY) -m pip install -q -e ".[ray]"
endif
	$(PY) -m sentlab.cli repro $(PROFILE) $(if $(FORCE),--force) $(if $(filter-out 0 1,$(JOBS))$(ADDRESS),--jobs $(JOBS)) \
	  $(if $(ADDRESS),--address $(ADDRESS)) $(if $(TABLE),--table $(TABLE))

# every stage of the profile in force: up to date / stale / running / failed, with its log
status: env
	$(PY) -m sentlab.cli status

smoke:
	$(MAKE) repro PROFILE=smoke

# Every stage of PROFILE on a tiny slice in a scratch copy (the workspace, dvc.lock and mlflow.db are not
# touched): ok / failed / needs an asset per stage, with time and memory projected for the full run.
preflight: env
	$(PY) -m sentlab.cli preflight --profile $(PROFILE)

test: env
	$(VENV)/bin/ruff check src pipeline tests benchmarks scripts
	$(PY) -m pytest -q -n auto --dist loadfile --no-loadscope-reorder --durations=30   # every core, files in tests/conftest.py's order (longest first); the slowest tests in every CI log

bench: env
	$(PY) benchmarks/eval_speed.py

mlflow-ui: env
	@echo "open $$($(PY) -c 'from sentlab.tracking import ui_link; print(ui_link())')"
	$(VENV)/bin/mlflow ui --backend-store-uri sqlite:///mlflow.db --port 5000

clean-env:
	rm -rf $(VENV)
