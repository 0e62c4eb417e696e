# podkit: `make test` and `make demo` set up everything they need on a fresh Debian machine.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# Debian packages that provide the real parts podkit drives (binary -> package).
DEB_PARTS := runc:runc crun:crun conmon:conmon /usr/lib/cni/bridge:containernetworking-plugins \
	/bin/busybox:busybox-static iptables:iptables ip:iproute2 docker-registry:docker-registry \
	openssl:openssl kubectl:kubernetes-client apparmor_parser:apparmor catatonit:catatonit \
	newuidmap:uidmap

.PHONY: test demo lint typecheck unit bench soak proto docs api-snapshot system-deps venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,grpc]'
	touch $@

system-deps:
	@missing=""; for pair in $(DEB_PARTS); do \
		bin=$${pair%%:*}; pkg=$${pair##*:}; \
		if ! { [ -x "$$bin" ] || command -v "$$bin" >/dev/null 2>&1; }; then missing="$$missing $$pkg"; fi; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing:$$missing"; \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
		else echo "not root: not installing$$missing (integration tests will skip)"; fi; \
	fi

lint: venv
	$(VENV)/bin/ruff check $(wildcard src tests benchmarks scripts soak examples)

typecheck: venv
	$(VENV)/bin/mypy --strict src examples

test: venv system-deps lint typecheck
	@rc=0; scripts/isolated $(VENV)/bin/pytest $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc = 5 ]; then echo "pytest collected no tests: failing" >&2; fi; exit $$rc

unit: venv
	$(VENV)/bin/pytest -m "not integration" $(PYTEST_ARGS)

demo: venv system-deps
	scripts/isolated $(PY) scripts/demo.py

# Each benchmark prints its table (ratios against raw operations in the same run); a missed
# target is marked in the table, only an error fails the target.
# bench_vs_containerd.py needs Debian's containerd: installed here, outside scripts/isolated's
# network namespace (never by `make test`).
bench: venv system-deps
	@if ! command -v containerd >/dev/null 2>&1 || ! command -v ctr >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then echo "installing: containerd"; apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q containerd; fi; fi
	@failed=""; for b in benchmarks/bench_*.py; do echo "== $$b"; \
		scripts/isolated $(PY) $$b || failed="$$failed $$b"; done; \
	if [ -n "$$failed" ]; then echo "benchmarks that failed:$$failed" >&2; exit 1; fi

# The standing soak and fault suite (issue 11): kill matrix, server soak, hostile corpus, one
# table; exits non-zero on any leak or failure. Not in `make test` (tests/test_soak_slice.py is
# its CI-sized slice). Tune with SOAK_TRIALS, SOAK_TIMED, SOAK_COMBOS, SOAK_OPS, SOAK_SECONDS,
# SOAK_CYCLES, SOAK_PODS, SOAK_PROBES (see soak/run.py).
soak: venv system-deps
	scripts/isolated $(PY) soak/run.py

proto: venv
	$(PY) scripts/gen_proto.py

# The HTML API reference from the docstrings (pdoc), one page per package face, into build/docs;
# any pdoc warning fails it (docs/reference.md). The field tables in docs/ are made by
# scripts/gen_reference.py.
docs: venv
	$(PY) scripts/api_docs.py --out build/docs

# docs/api-snapshot.txt: the public API (docs/api.md) with signatures; tests/test_api_snapshot.py
# fails while it is stale.
api-snapshot: venv
	$(PY) scripts/api_snapshot.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache

# The cgroup-v2 guest lane (issue 13, docs/hosts.md): a QEMU guest (software emulation) whose
# root is this machine's filesystem, read-only under a tmpfs overlay, with cgroup2 alone at
# /sys/fs/cgroup; the tests run inside it and its exit code is this target's. Installs
# qemu-system-x86 when missing; scripts/vm setup fetches the kernel .deb into .vm/.
# CGROUPV2_VM_ARGS=--systemd boots the host's systemd as PID 1 instead of a shell (and sets
# PODKIT_REQUIRE_SYSTEMD=1: the systemd cgroup driver tests fail instead of skipping).
CGROUPV2_VM_ARGS ?=
CGROUPV2_TESTS ?= tests/test_cgroups.py tests/runtime tests/sandbox/test_manager_integration.py \
	tests/sandbox/test_manager_containers.py tests/cri/test_server.py \
	tests/sandbox/test_cgroup_driver.py tests/cri/test_cgroup_driver.py \
	tests/sandbox/test_resources_v2.py tests/cri/test_resources.py \
	tests/cri/test_userns.py tests/sandbox/test_userns_integration.py
CGROUPV2_PYTEST_ARGS ?= -q -m integration --tb=line -rfE
.PHONY: test-cgroupv2
test-cgroupv2: venv system-deps
	@if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then \
		if [ "$$(id -u)" != 0 ]; then echo "test-cgroupv2 needs root (QEMU, the 9p root)" >&2; exit 1; fi; \
		echo "installing: qemu-system-x86"; apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends qemu-system-x86; \
	fi
	scripts/vm setup
	scripts/vm run $(CGROUPV2_VM_ARGS) --timeout 3000 -e PODKIT_LEAK_CHECK=1 \
		$(if $(findstring --systemd,$(CGROUPV2_VM_ARGS)),-e PODKIT_REQUIRE_SYSTEMD=1) -- \
		scripts/isolated $(VENV)/bin/pytest $(CGROUPV2_PYTEST_ARGS) $(CGROUPV2_TESTS)
