# Real-packet network emulation lab. Two commands matter: `make demo` and `make test`.
# Both install what is missing first (Debian packages with apt-get, Python packages with pip).

PYTHON ?= python3
APT_PACKAGES = iproute2 nftables bird2 conntrack conntrackd iputils-ping graphviz tshark iperf3 openssh-client sshpass procps strongswan-charon strongswan-swanctl libcharon-extra-plugins libstrongswan-standard-plugins
DEMO_LAB ?= labs/topology3.yml
IMAGE ?= lab-node
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' lab_orchestrator/__init__.py)

.PHONY: help deps deps-apt deps-python test test-unit test-integration lint demo bench clean image

help:
	@echo "make demo              install what is missing, bring up $(DEMO_LAB), show it working, tear it down"
	@echo "make test              install what is missing, run lint + unit + namespace (root) tests"
	@echo "make test-unit         fast tests, no root needed"
	@echo "make lint              ruff + mypy"
	@echo "make bench             benchmarks (root); figures go to docs/benchmarks.md"
	@echo "make image             the containerlab node image $(IMAGE):$(VERSION) (needs Docker; docs/containerlab.md)"

deps: deps-apt deps-python

deps-apt:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "missing Debian packages:$$missing (run as root or: sudo apt-get install$$missing)"; exit 1; fi; \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

deps-python:
	@$(PYTHON) -m pip install -q --disable-pip-version-check --root-user-action=ignore -e '.[dev]'

lint: deps-python
	$(PYTHON) -m ruff check lab_orchestrator dataplane tests bench
	$(PYTHON) -m mypy lab_orchestrator dataplane

test-unit: deps-python
	$(PYTHON) -m pytest tests/unit -q

test-integration: deps
	$(PYTHON) -m pytest tests/integration -q

test: deps lint
	$(PYTHON) -m pytest tests -q

demo: deps
	@$(PYTHON) -m lab_orchestrator.demo $(DEMO_LAB)

bench: deps
	$(PYTHON) bench/chash_moves.py
	$(PYTHON) bench/bringup.py --quick
	$(PYTHON) bench/chash_dataplane.py --rounds 3 --trials 10
	$(PYTHON) bench/chash_dataplane.py --lab topology3 --rounds 3 --trials 20
	$(PYTHON) bench/ssh.py --quick
	$(PYTHON) bench/traffic_gen.py
	$(PYTHON) bench/ha.py --quick
	$(PYTHON) bench/flexvpn.py --quick

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache .hypothesis

# The node image of the containerlab backend (images/node/Dockerfile), tagged VERSION and latest.
image:
	@command -v docker >/dev/null 2>&1 || { echo "make image needs Docker: no docker command here"; exit 1; }
	@docker info >/dev/null 2>&1 || { echo "make image needs a running Docker engine: the docker client cannot reach one"; exit 1; }
	docker build -f images/node/Dockerfile -t $(IMAGE):$(VERSION) -t $(IMAGE):latest .
