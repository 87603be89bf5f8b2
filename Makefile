# Real-packet network emulation lab. Two commands matter: `make demo` and `make test`.
# Both install what is missing first: Debian packages with apt-get, the Python package (editable) and its
# dependencies into the checkout's own virtualenv .venv (never into the system Python), and, as root, the
# link /usr/local/bin/lab -> .venv/bin/lab so that `lab` and `sudo lab` both work.

SYSTEM_PYTHON ?= python3
VENV ?= .venv
PYTHON := $(VENV)/bin/python
# replaced only when absent or already a link to a lab virtualenv (see deps-link)
LINK ?= /usr/local/bin/lab
# netbase: /etc/protocols, without which conntrackd's protocol filter (TCP, UDP, ICMP) is empty and MNHA
# syncs no session (minimal images such as debootstrap minbase lack it)
APT_PACKAGES = python3 python3-venv iproute2 nftables bird2 conntrack conntrackd tayga netbase iputils-ping graphviz tshark iperf3 openssh-client sshpass procps strongswan-charon strongswan-swanctl libcharon-extra-plugins libstrongswan-standard-plugins
# used only by the live-view tests (`lab web` in headless Chromium, `lab top` in tmux); they skip without them
TEST_APT_PACKAGES = chromium tmux
# used only by `make bench` (bench/tcp_cps.py: connections per second with Debian's wrk against nginx, beside
# the lab's own generator); the benchmark starts its own nginx in a lab namespace with a configuration of its
# own. Debian's package would also start its own nginx service (port 80) at install: apt-install keeps
# every package's system service from starting (policy-rc.d), as the lab runs its own daemons in its
# namespaces; the services stay enabled (`systemctl disable nginx` if it is not wanted at the next boot)
BENCH_APT_PACKAGES = wrk nginx
DEMO_LAB ?= labs/topology3.yml
# what `make test` runs after lint (e.g. TESTS=tests/unit)
TESTS ?= tests
# `make test-repeat`: how many runs, of what, which tests by name (pytest -k K) and other pytest arguments
N ?= 3
REPEAT_TESTS ?= tests/integration
K ?=
REPEAT_ARGS ?=
IMAGE ?= lab-node
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' lab_orchestrator/__init__.py)
# tools of the recipes (pytest's children, bench scripts calling `lab`) come from the virtualenv first
VENV_PATH = PATH="$(CURDIR)/$(VENV)/bin:$$PATH"

.PHONY: image-current docs results events-results help deps deps-apt deps-bench apt-install print-apt-packages deps-python deps-link distclean test test-fresh test-repeat test-unit test-integration lint demo bench clean image

help:
	@echo "make demo              install what is missing, bring up $(DEMO_LAB), show it working, tear it down"
	@echo "make test              install what is missing, run lint + unit + namespace (root) tests"
	@echo "make test-unit         fast tests, no root needed"
	@echo "make test-repeat N=3   the namespace (root) tests N times in a row; lists every test that failed in any run"
	@echo "make test-fresh        make demo + make test on a fresh clone in a Debian 12 minbase chroot (root)"
	@echo "make lint              ruff + mypy"
	@echo "make docs              regenerate the CLI and topology references, the JSON Schema and the figures"
	@echo "make results           run the JVD test plan (root), keep its report in docs/results/, rewrite the figures"
	@echo "make events-results    lab events run on every shipped lab (root), keep the reports in docs/events-results/"
	@echo "make bench             benchmarks (root); details in docs/benchmarks-*.md, summary docs/benchmarks.md"
	@echo "make image             the containerlab node image $(IMAGE):$(VERSION), from Debian packages (root; docs/containerlab.md)"

deps: deps-apt deps-python deps-link

deps-apt:
	@$(MAKE) -s apt-install PACKAGES="$(APT_PACKAGES) $(TEST_APT_PACKAGES)"

deps-bench:
	@$(MAKE) -s apt-install PACKAGES="$(BENCH_APT_PACKAGES)"

apt-install:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "missing Debian packages:$$missing (run as root or: sudo apt-get install$$missing)"; exit 1; fi; \
	  echo "installing Debian packages:$$missing (their system services are not started)"; \
	  made=""; if [ ! -e /usr/sbin/policy-rc.d ]; then \
	    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && made=1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  rc=$$?; if [ -n "$$made" ]; then rm -f /usr/sbin/policy-rc.d; fi; exit $$rc; \
	fi

deps-python: $(VENV)/.installed

# Re-run only when pyproject.toml changed (or the virtualenv is missing or broken).
$(VENV)/.installed: pyproject.toml
	@if ! $(PYTHON) -c '' 2>/dev/null; then \
	  rm -rf $(VENV); echo "creating the virtualenv $(VENV) ($(SYSTEM_PYTHON) -m venv)"; \
	  $(SYSTEM_PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	    echo "cannot create $(VENV): install python3-venv first (as root: make deps-apt, or apt-get install python3-venv)"; exit 1; }; \
	fi
	@echo "installing the lab package and its Python dependencies into $(VENV)"
	@$(PYTHON) -m pip install -q --disable-pip-version-check --root-user-action=ignore -e '.[dev]'
	@touch $@

# `lab` for root, also under sudo (whose secure_path holds /usr/local/bin but not this checkout).
deps-link: deps-python
	@target="$(CURDIR)/$(VENV)/bin/lab"; \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "lab is $$target (as root, make deps links it as $(LINK))"; \
	elif [ -L "$(LINK)" ] && [ "$$(readlink "$(LINK)")" = "$$target" ]; then :; \
	elif [ ! -e "$(LINK)" ] && [ ! -L "$(LINK)" ] || { [ -L "$(LINK)" ] && case "$$(readlink "$(LINK)")" in \
	    */bin/lab) v="$$(dirname "$$(dirname "$$(readlink "$(LINK)")")")"; [ -f "$$v/pyvenv.cfg" ] || [ ! -e "$$v" ];; \
	    *) false;; esac; }; then \
	  mkdir -p "$$(dirname "$(LINK)")" && ln -sfn "$$target" "$(LINK)" && echo "linked $(LINK) -> $$target"; \
	else \
	  echo "$(LINK) exists and is not a link to a lab virtualenv: left alone (lab is $$target)"; \
	fi

lint: deps-python
	$(PYTHON) -m ruff check lab_orchestrator dataplane labkit tests bench
	$(PYTHON) -m mypy lab_orchestrator dataplane labkit

test-unit: deps-python
	$(PYTHON) -m pytest tests/unit -q

test-integration: deps
	$(VENV_PATH) $(PYTHON) -m pytest tests/integration -q

# The kept results (docs/results/, docs/events-results/) must not be older than the code they describe
# (tests/unit/test_doc_figures.py; the rule is in bench/docfigures.py). RESULTS_AGE=skip leaves that out.
RESULTS_AGE ?= check
test: deps lint image-current
	LAB_RESULTS_AGE=$(RESULTS_AGE) $(VENV_PATH) $(PYTHON) -m pytest $(TESTS) -q --durations=20

# A test that fails in one run of several depends on timing: run the suite N times, report each such test.
test-repeat: deps lint
	$(VENV_PATH) $(PYTHON) tests/repeat.py --runs $(N) -- $(REPEAT_TESTS) -q $(if $(K),-k "$(K)") $(REPEAT_ARGS)

# The README's two commands on a fresh clone in a debootstrap'ed Debian 12 minbase root (root; needs network
# to the Debian mirror and PyPI; the root tarball and downloads are cached in /var/cache/lab-test-fresh).
test-fresh:
	.ci/test-fresh all

print-apt-packages:
	@echo $(APT_PACKAGES) $(TEST_APT_PACKAGES)

demo: deps
	@$(VENV_PATH) $(PYTHON) -m lab_orchestrator.cli.demo $(DEMO_LAB)

bench: deps deps-bench
	$(VENV_PATH) $(PYTHON) bench/chash_moves.py
	$(VENV_PATH) $(PYTHON) bench/restore_policy.py --out docs/benchmarks-restore.md
	$(VENV_PATH) $(PYTHON) bench/bringup.py --quick
	$(VENV_PATH) $(PYTHON) bench/chash_dataplane.py --rounds 3 --trials 10
	$(VENV_PATH) $(PYTHON) bench/chash_dataplane.py --lab topology3 --rounds 3 --trials 20 --out docs/benchmarks-chash-tlb.md
	$(VENV_PATH) $(PYTHON) bench/traffic_pacing.py --rounds 3
	$(VENV_PATH) $(PYTHON) bench/ssh.py --quick
	$(VENV_PATH) $(PYTHON) bench/traffic_gen.py
	$(VENV_PATH) $(PYTHON) bench/ha.py --quick
	$(VENV_PATH) $(PYTHON) bench/flexvpn.py --quick
	$(VENV_PATH) $(PYTHON) bench/ikev2_flood.py --quick --write
	$(VENV_PATH) $(PYTHON) bench/esp.py --rounds 3 --seconds 3
	$(VENV_PATH) $(PYTHON) bench/flexvpn_failover.py --rounds 3
	$(VENV_PATH) $(PYTHON) bench/nat64_forwarding.py
	$(VENV_PATH) $(PYTHON) bench/nat64_translators.py
	$(VENV_PATH) $(PYTHON) bench/bfd_detection.py --runs 5
	$(VENV_PATH) $(PYTHON) bench/tcp_cps.py --labs topology3 topology1
	$(PYTHON) bench/summary.py   # docs/benchmarks.md from the detail files the scripts wrote

clean:
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis

distclean: clean
	rm -rf $(VENV)

# The node image of the containerlab backend, tagged VERSION and latest: a debootstrap'ed Debian 12 root with the
# node's packages and the lab's wheel, imported with `docker import` (images/node/build; no image registry).
# Installs Docker's engine (docker.io) and debootstrap when missing; starts dockerd for the build if none
# answers (images/node/engine: without touching the host's iptables or forwarding) and stops it after.
image: deps-python
	@$(MAKE) -s apt-install PACKAGES="docker.io debootstrap"
	IMAGE=$(IMAGE) PYTHON=$(CURDIR)/$(PYTHON) images/node/build

# Before `make test`: the node image rebuilt when it is older than the sources (the real-engine test,
# tests/integration/test_clab_engine.py, skips a stale image), only where `make image` installed Docker's
# engine and debootstrap, and only when the selected tests include that test.
image-current: deps-python
ifneq (,$(filter tests tests/ tests/integration tests/integration/ %test_clab_engine.py,$(TESTS)))
	@if [ "$$(id -u)" = 0 ] && command -v dockerd >/dev/null && command -v debootstrap >/dev/null; then \
	  IMAGE=$(IMAGE) PYTHON=$(CURDIR)/$(PYTHON) images/node/build --if-stale; fi
endif

# Generated documentation: topology reference + JSON Schema (the model), CLI reference (the commands),
# figures (lab graph); a unit test fails when they are stale.
docs: deps-python
	PYTHONPATH=$(CURDIR) $(PYTHON) -m lab_orchestrator.cli.docgen
	$(PYTHON) bench/docfigures.py
	$(PYTHON) bench/summary.py

# The JVD test plan run on this checkout (root): its report kept in docs/results/ (JSON, HTML, JUnit), then
# every figure made from it rewritten (docs/results.md, the CI workflow's budgets). A failed case is kept
# too (lab report exits 1): the page says which and why. RESULTS_ARGS narrows the plan (e.g. -t 1).
RESULTS_ARGS ?=
results: deps
	@[ -z "$$(git status --porcelain --untracked-files=no)" ] || { echo "commit first: a result records the commit it ran on"; exit 1; }
	rm -rf build/results
	$(VENV_PATH) lab report -o build/results $(RESULTS_ARGS); rc=$$?; [ $$rc -le 1 ] || exit $$rc
	$(PYTHON) bench/docfigures.py --keep build/results

# `lab events run` on every shipped lab of topologies 1-4, topology3-mixed and the dual-stack topologies 1-4 (root; one lab at a time, up and down): each report
# kept in docs/events-results/ (bench/events_results.py), then the pages made from them rewritten.
EVENTS_LABS ?= topology1 topology2 topology3 topology4 topology1-cgnat topology2-cgnat topology3-cgnat topology4-cgnat topology2-srg1 topology3-srg1 topology4-srg1 topology3-mixed topology1-dualstack topology2-dualstack topology3-dualstack topology4-dualstack
events-results: deps
	$(VENV_PATH) $(PYTHON) bench/events_results.py run $(EVENTS_LABS); rc=$$?; [ $$rc -le 1 ] || exit $$rc
	$(PYTHON) bench/docfigures.py
