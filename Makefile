# The two commands of the README:
#   make demo   install everything into .venv, then build every target at the demo scale (digits, CPU)
#   make test   install, then run the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
CORES ?= 2
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: install demo smoke test dvc-demo dvc-adopt figures clean-demo readme wheelhouse

install: $(STAMP)

# pip installs without byte-compiling (it compiles on one core: ~80 s of the install); compileall then compiles on
# every core. Not skipped: where PYTHONDONTWRITEBYTECODE is set, each of the pipeline's processes would otherwise
# compile PyTorch's modules anew (~8 s a job). A few files that are not Python 3.11 (packages' test data) fail to
# compile, as they do under pip. The packages' own test suites (3,600 files) are never imported and not compiled.
# The stamp's name holds pyproject.toml's hash: its content decides, not its time (a checkout whose pyproject.toml
# is newer but the same, beside an installed .venv, installs nothing).
$(STAMP): | pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --no-compile -e '.[test]'
	$(BIN)/python -m compileall -q -j 0 -x '/tests?/' $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') src > /dev/null || true
	rm -f $(VENV)/.installed-*
	touch $@

demo: install
	$(BIN)/snakemake --cores $(CORES) --scheduler greedy --configfile config/demo.yaml
	@echo
	@echo "Tables (demo scale): results/demo/tables/table1.md (also .csv, .tex and .html)"

smoke: install
	$(BIN)/snakemake --cores $(CORES) --configfile config/smoke.yaml

# Every core: pytest-xdist, each test module one unit of work (tests/conftest.py).
test: install
	$(BIN)/python -m pytest -q -n auto --dist loadscope --no-loadscope-reorder

# The same demo through DVC (dvc.yaml and jobs.json: `tradeoff export-dvc`; docs/dvc.md), one stage at a time. It
# records what it ran in dvc.lock; `dvc push` then sends the results to the remote `localremote`.
dvc-demo: install
	$(BIN)/dvc repro

# After `make demo` (Snakemake): DVC records that build as its own (dvc commit, file times unchanged), so that
# `dvc status` is up to date and `snakemake -n` still has nothing to do (docs/dvc.md).
dvc-adopt: install
	$(BIN)/tradeoff dvc-adopt

# The README's table excerpt, from the demo's built Table 1(a) (after `make demo`): generated, never hand-copied.
readme: install
	$(BIN)/python -m tradeoff.report.readme_excerpt results/demo/tables/table1a.md README.md

# An offline GPU node's missing wheels (config/node-wheels.txt, beside its own config/node-packages.txt) for its
# Python, manylinux x86_64, into .wheelhouse/py<version>: then scripts/gpu-node.sh on the node (docs/gpu.md).
PYTHON_VERSION ?= 3.12
wheelhouse:
	$(PYTHON) scripts/wheelhouse.py --python-version $(PYTHON_VERSION) $(if $(WHEELHOUSE),--dest $(WHEELHOUSE))
