# Caerus DLS — entry points. `make help` lists them.
#
# Set CARGO_TARGET_DIR to keep build artifacts outside the checkout (CI does).
# `make test` and `make lint` first run `make deps`, which installs what they need beyond a
# Rust toolchain (scripts/install-deps.sh); `make run` needs nothing but cargo.

CARGO        ?= cargo
CLUSTER_DIR  ?= .cluster
# Node N: gRPC on 7070+2(N-1), HTTP (metrics, health) on the port after it, peer port
# (raft only, mutual TLS) on 7080+2(N-1).
PEERS         = 1=127.0.0.1:7070/7080,2=127.0.0.1:7072/7082,3=127.0.0.1:7074/7084
CERTS_DIR     = $(CLUSTER_DIR)/certs
TARGET_DIR   := $(or $(CARGO_TARGET_DIR),target)
DLS_RELEASE   = $(TARGET_DIR)/release/dls
# `make run`, `cluster` and `install`: the release build without debug info (profile `lean`;
# `release` keeps line tables for the benchmarks' perf profiles).
DLS_LEAN      = $(TARGET_DIR)/lean/dls
# The last released contract image that `buf breaking` checks against (proto/releases/README.md).
PROTO_BASELINE = proto/releases/caerus-dls-v1.0.0.binpb

# Where scripts/install-deps.sh and sdks/tools.sh keep fetched tools; a Go or Node fetched
# there (when the machine's is missing or too old) comes first on PATH.
CAERUS_TOOLS_DIR ?= $(HOME)/.cache/caerus-dls/tools
export CAERUS_TOOLS_DIR
export PATH := $(CAERUS_TOOLS_DIR)/node/bin:$(CAERUS_TOOLS_DIR)/go/bin:$(PATH)

.DEFAULT_GOAL := help
.PHONY: help run lean install uninstall deps test test-playground test-conformance sdks check-sdks lint-proto test-go-sample test-rust test-python test-node test-kotlin test-samples test-chaos chaos rolling-restart test-upgrade demo wheel dls-debug bench-smoke build release cluster cluster-stop example bench bench-state soak stress lint fmt clean release-portable python-portable dls-kit dist npm-pack maven-install test-dist test-wheel test-npm-pack test-maven-sample test-rust-cli-snippets test-packages image test-image release-all test-release-all test-cross windows-dls test-windows

help: ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  make %-18s %s\n", $$1, $$2}'

run: lean ## Run a single-node server on 127.0.0.1:7070 with data in ./dls-data
	$(DLS_LEAN) serve

# `make install`: root installs into /usr/local/bin (on every PATH); anyone else into
# ~/.local/bin (on the PATH of most distributions' login shells), so it needs no sudo.
# DESTDIR stages it for a package. INSTALL_BIN=path installs that binary instead of
# building a release one (the test installs the debug build it already has).
PREFIX      ?= $(if $(filter 0,$(shell id -u)),/usr/local,$(HOME)/.local)
BINDIR      ?= $(PREFIX)/bin
INSTALL_BIN ?= $(DLS_LEAN)

install: $(if $(filter $(DLS_LEAN),$(INSTALL_BIN)),lean) ## Put dls on the PATH: the release build without debug info into PREFIX/bin (/usr/local as root, else ~/.local)
	install -d $(DESTDIR)$(BINDIR)
	install -m 0755 $(INSTALL_BIN) $(DESTDIR)$(BINDIR)/dls
	@echo "installed $(DESTDIR)$(BINDIR)/dls: $$($(DESTDIR)$(BINDIR)/dls --version)"
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; \
	  *) echo "note: $(BINDIR) is not on PATH; add it: export PATH=\"$(BINDIR):\$$PATH\"";; esac

uninstall: ## Remove the dls that `make install` put in PREFIX/bin
	rm -f $(DESTDIR)$(BINDIR)/dls

deps: ## Install what the tests and lint need beyond Rust (apt-get as root, else prints the command; Go from the Go proxy if too old)
	@scripts/install-deps.sh

test: deps test-rust test-python test-node test-kotlin test-samples test-chaos bench-smoke check-sdks test-go-sample test-conformance test-playground test-packages ## Run every test (after `make deps`): Rust, the SDKs, the samples' short demo, a short seeded fault run, generated-client checks, the Playground in headless Chromium, the packages installed without Rust

test-rust: ## Rust tests: unit tests and integration tests against real dls processes
	$(CARGO) test --lib --bins --tests --examples

dls-debug: ## Build the dls binary the SDK test suites start
	$(CARGO) build -p caerus-cli --bin dls

test-python: dls-kit ## Build the Python SDK into a virtualenv and run its pytest suite
	$(MAKE) -C bindings/python test DLS_BIN=$(abspath $(TARGET_DIR))/debug/dls KIT_BIN=$(KIT_BIN)

test-node: dls-kit ## Build the Node SDK (@caerus-dev/sdk) and run its node --test suite
	$(MAKE) -C bindings/node test DLS_BIN=$(abspath $(TARGET_DIR))/debug/dls KIT_BIN=$(KIT_BIN)

build: ## Debug build of the workspace
	$(CARGO) build --workspace --all-targets

release: ## Optimized build of the `dls` binary, with line tables for perf (benchmarks, demo, chaos)
	$(CARGO) build --release -p caerus-cli --bin dls

lean: ## Optimized build of `dls` without debug info, into <target dir>/lean (run, cluster, install)
	$(CARGO) build --profile lean -p caerus-cli --bin dls

cluster: lean ## Start a local three-node cluster in the background (gRPC 7070/7072/7074, HTTP 7071/7073/7075, peers 7080/7082/7084 with mutual TLS)
	@mkdir -p $(CLUSTER_DIR)
	@[ -f $(CERTS_DIR)/ca.pem ] || $(DLS_LEAN) certs init --dir $(CERTS_DIR)
	@for id in 1 2 3; do [ -f $(CERTS_DIR)/node-$$id.pem ] || \
	  $(DLS_LEAN) certs node $$id --host 127.0.0.1 --host localhost --dir $(CERTS_DIR); done
	@for id in 1 2 3; do \
	  if [ -f $(CLUSTER_DIR)/node-$$id.pid ] && kill -0 $$(cat $(CLUSTER_DIR)/node-$$id.pid) 2>/dev/null; then \
	    echo "node $$id already running (pid $$(cat $(CLUSTER_DIR)/node-$$id.pid))"; continue; fi; \
	  $(DLS_LEAN) serve --node-id $$id --peers $(PEERS) --data-dir $(CLUSTER_DIR)/data-$$id \
	    --http-listen 127.0.0.1:$$((7069 + 2 * id)) \
	    --peer-tls-cert $(CERTS_DIR)/node-$$id.pem --peer-tls-key $(CERTS_DIR)/node-$$id-key.pem \
	    --peer-tls-ca $(CERTS_DIR)/ca.pem \
	    >> $(CLUSTER_DIR)/node-$$id.log 2>&1 & echo $$! > $(CLUSTER_DIR)/node-$$id.pid; \
	  echo "started node $$id (pid $$!), log $(CLUSTER_DIR)/node-$$id.log"; \
	done
	@echo "waiting for a leader..."; for i in $$(seq 1 50); do \
	  if grep -q "became leader" $(CLUSTER_DIR)/node-*.log 2>/dev/null; then break; fi; sleep 0.2; done
	@grep -h "became leader" $(CLUSTER_DIR)/node-*.log | tail -1 || echo "no leader yet: see $(CLUSTER_DIR)/node-*.log"
	@echo "cluster up: DLS_ENDPOINTS=127.0.0.1:7070,127.0.0.1:7072,127.0.0.1:7074   (stop with: make cluster-stop)"
	@echo "metrics:    http://127.0.0.1:7071/metrics  http://127.0.0.1:7073/metrics  http://127.0.0.1:7075/metrics"
	@echo "peers talk mutual TLS with the certificates in $(CERTS_DIR) (made by dls certs)"

cluster-stop: ## Stop the local cluster started by `make cluster` (data is kept in .cluster/)
	@for f in $(CLUSTER_DIR)/node-*.pid; do [ -f "$$f" ] || continue; \
	  pid=$$(cat $$f); kill $$pid 2>/dev/null && echo "stopped pid $$pid"; rm -f $$f; done; true

example: ## Take a lock with the Rust quick-start example (needs a running server)
	$(CARGO) run -p caerus-core --example quickstart

bench: release ## Benchmarks: lock table enqueue cost, then DLS vs etcd vs Redis (prints a table, writes a results file)
	$(CARGO) bench -p caerus-locks --bench enqueue
	$(MAKE) -C bench all DLS_BIN=$(abspath $(DLS_RELEASE))
	$(MAKE) bench-sdk

bench-state: release ## Heartbeat cost (10,000 transactions), deadlock latency, memory at 100k locks, restore time, revocation → lost signal with and without the lost stream → <target dir>/bench-results/state.md
	$(MAKE) -C bench state DLS_BIN=$(abspath $(DLS_RELEASE))

bench-smoke: dls-debug ## A few seconds of every benchmark workload against DLS, to keep the harness working
	$(MAKE) -C bench smoke DLS_BIN=$(abspath $(TARGET_DIR))/debug/dls

test-kotlin: dls-kit ## Build the uniffi library and run the Kotlin (JUnit 5, Maven) suite
	$(MAKE) -C bindings/uniffi test-kotlin DLS_BIN=$(abspath $(TARGET_DIR))/debug/dls KIT_BIN=$(KIT_BIN)

test-conformance: dls-debug ## Conformance scenarios (conformance/) through the Rust core and the raw Go, Python, Java and Ruby clients against a real node
	CARGO="$(CARGO)" DLS_BIN=$(abspath $(TARGET_DIR))/debug/dls conformance/run.sh

test-playground: dls-debug ## Browser tests of the Playground page (playwright-core, Debian's chromium, headless); screenshots in playground/artifacts/
	cd playground && npm ci --no-audit --no-fund && DLS_BIN=$(abspath $(TARGET_DIR))/debug/dls npm test

test-samples: dls-debug ## Short form of the billing demo (ledger, workers, fencing), the deadlock and fenced-storage samples, as a test
	$(MAKE) -C samples test DLS_BIN=$(abspath $(TARGET_DIR))/debug/dls

demo: release ## The billing demo: 3 nodes, a fenced ledger, workers in Rust/Python/Node, a frozen worker and a leader kill
	$(MAKE) -C samples demo DLS_BIN=$(abspath $(DLS_RELEASE))

test-chaos: dls-debug ## A short, seeded fault-injection run (same checkers as `make chaos`)
	$(MAKE) -C chaos short DLS_BIN=$(abspath $(TARGET_DIR))/debug/dls

stress: ## Timing-sensitive load tests CI does not run (release build): one key at 10x the sustained rate for 30 s beside another key's heartbeating transactions (server/tests/overload.rs); prints rates, refusals, leader RSS
	$(CARGO) test --release -p caerus-server --test integration -- overload:: --ignored --nocapture

soak: release ## 10 minutes of legitimate churn beside every attack on the ports (and 10 without): node exits, RSS, the clients' p99 side by side; MINUTES=N (not in CI)
	$(CARGO) build --release -p caerus-bench --bin dls-soak
	ulimit -n 65536 2>/dev/null || ulimit -n $$(ulimit -Hn); \
	  $(TARGET_DIR)/release/dls-soak --dls-bin $(abspath $(DLS_RELEASE)) --minutes $(or $(MINUTES),10)

rolling-restart: release ## Restart every node of a 3-node cluster in turn under a contending load (release build): the longest pause between grants around each stop; ROUNDS=N
	$(MAKE) -C chaos rolling DLS_BIN=$(abspath $(DLS_RELEASE))

chaos: release test-upgrade ## The full fault-injection suite on 3 and 5 nodes (prints its seed; SEED=N replays), and the upgrade from v0.1.0
	$(MAKE) -C chaos full DLS_BIN=$(abspath $(DLS_RELEASE))

# The release every later one upgrades from in place (v0.1.0).
V0_1_0 = ca59f73

test-upgrade: dls-debug ## Upgrade a loaded 3-node cluster from v0.1.0 (built once into CAERUS_CACHE_DIR/releases, default /var/cache/caerus-dls) to this build, a node at a time: the feature-level gate in the mixed state, then a level-2 feature
	@old=$$(scripts/old-release.sh $(V0_1_0)) && \
	  $(MAKE) -C chaos upgrade DLS_BIN=$(abspath $(TARGET_DIR))/debug/dls FROM=$$old

# ---- Packages: what users install, built as they get them and tested without Rust ------
# `make test-packages` (part of `make test`) installs each package into a fresh directory
# with no cargo or rustc on PATH and takes a lock from a real node started by the test kit.
DLS_VERSION   = $(shell sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
KIT_BIN       = $(abspath $(TARGET_DIR))/debug/dls-cluster
DIST_DIR      = $(TARGET_DIR)/dist
DIST_TARBALL  = $(DIST_DIR)/caerus-dls-$(DLS_VERSION)-linux-$(shell uname -m).tar.gz

# One release build (profile `dist`) of the server (dist), the Node addon (npm-pack), the JVM
# library (maven-install) and the Python extension (wheel), linked by zig against glibc 2.17
# symbols so each loads on any glibc distribution since CentOS 7. All four go into one target
# dir with the same linker wrappers, so their shared dependencies compile once (the Python
# extension in a second invocation: it turns on caerus-types' pyo3 feature, which must not
# reach the others). cargo-zigbuild and ziglang come from PyPI.
ZIGBUILD_VERSION = 0.24.1
ZIGBUILD_VENV    = $(CAERUS_TOOLS_DIR)/cargo-zigbuild-$(ZIGBUILD_VERSION)
PORTABLE_TARGET  = x86_64-unknown-linux-gnu.2.17
PORTABLE_DIR     = $(abspath $(TARGET_DIR))/zig
# CI packs and installs the packages from PACKAGE_PROFILE=ci (.ci/run): the same code without
# optimisation, which checks the packaging as well and compiles in about half the CPU time on a
# fresh machine, sharing its build scripts and proc-macros with test-cross's arm64 build.
# What ships, and what the benchmarks install, is the default: dist.
PACKAGE_PROFILE ?= dist
PORTABLE         = $(PORTABLE_DIR)/x86_64-unknown-linux-gnu/$(PACKAGE_PROFILE)

$(ZIGBUILD_VENV)/bin/cargo-zigbuild:
	@echo "==> installing cargo-zigbuild $(ZIGBUILD_VERSION) and ziglang (PyPI) into $(ZIGBUILD_VENV)"
	python3 -m venv $(ZIGBUILD_VENV)
	$(ZIGBUILD_VENV)/bin/pip install --quiet --disable-pip-version-check "cargo-zigbuild==$(ZIGBUILD_VERSION)"

ZIGBUILD = PATH="$(ZIGBUILD_VENV)/bin:$$PATH" CARGO_ZIGBUILD_PYTHON_PATH=$(ZIGBUILD_VENV)/bin/python \
	  cargo-zigbuild zigbuild --profile $(PACKAGE_PROFILE) --target $(PORTABLE_TARGET) --target-dir $(PORTABLE_DIR)

release-portable: $(ZIGBUILD_VENV)/bin/cargo-zigbuild ## Release build for glibc >= 2.17 (zig linker) of what the packages ship: dls, the Node addon, the JVM library
	@echo "==> release build of dls, caerus-node and caerus-uniffi for $(PORTABLE_TARGET) into $(PORTABLE_DIR)"
	$(ZIGBUILD) -p caerus-cli -p caerus-node -p caerus-uniffi --lib --bin dls --no-default-features
	@for f in dls libcaerus_node.so libcaerus_uniffi.so; do scripts/test-packages/check-glibc.sh $(PORTABLE)/$$f || exit 1; done

python-portable: $(ZIGBUILD_VENV)/bin/cargo-zigbuild ## Release build for glibc >= 2.17 (zig linker) of the Python extension (abi3), in the release-portable tree
	@echo "==> release build of caerus-python (abi3, CPython >= 3.9) for $(PORTABLE_TARGET) into $(PORTABLE_DIR)"
	PYO3_PYTHON=python3 $(ZIGBUILD) -p caerus-python --lib --features pyo3/extension-module
	scripts/test-packages/check-glibc.sh $(PORTABLE)/libcaerus_native.so

# Windows x64: dls.exe with the zig linker (no MinGW needed), run under Debian's wine64.
WINDOWS_TARGET = x86_64-pc-windows-gnu
WINDOWS_DLS    = $(abspath $(TARGET_DIR))/$(WINDOWS_TARGET)/lean/dls.exe

windows-dls: $(ZIGBUILD_VENV)/bin/cargo-zigbuild ## dls.exe for Windows x64 (zig linker, lean profile)
	@echo "==> lean build of dls.exe for $(WINDOWS_TARGET)"
	PATH="$(ZIGBUILD_VENV)/bin:$$PATH" CARGO_ZIGBUILD_PYTHON_PATH=$(ZIGBUILD_VENV)/bin/python \
	  cargo-zigbuild zigbuild --profile lean --target $(WINDOWS_TARGET) -p caerus-cli --bin dls

test-windows: windows-dls dls-debug ## dls.exe under wine64: serves, a lock from Linux dls and from dls.exe, a restart on the same data, a higher token (skipped, saying why, without wine64)
	ZIG="$(ZIGBUILD_VENV)/bin/python -m ziglang" scripts/test-packages/windows.sh $(WINDOWS_DLS) $(abspath $(TARGET_DIR))/debug/dls

dls-kit: dls-debug ## Build the test kit's dls-cluster (starts the clusters of the shell tests and the SDK suites)
	$(CARGO) build -q -p caerus-testkit --bin dls-cluster

dist: release-portable ## Server tarball in <target dir>/dist: bin/dls (glibc >= 2.17), systemd unit, example config, man pages, completions, dashboards, alerts, docs
	@echo "==> packing $(DIST_TARBALL)"
	deploy/dist.sh $(PORTABLE)/dls $(DIST_DIR)

wheel: python-portable ## Python: abi3 manylinux2014 wheel + sdist into bindings/python/dist (checked: tags, stubs, glibc <= 2.17)
	$(MAKE) -C bindings/python wheel EXTENSION_SO=$(PORTABLE)/libcaerus_native.so

npm-pack: release-portable ## Node: tarballs of @caerus-dev/sdk and @caerus-dev/sdk-linux-x64-gnu into bindings/node/dist
	$(MAKE) -C bindings/node npm-pack ADDON_SO=$(PORTABLE)/libcaerus_node.so

maven-install: release-portable ## JVM: `mvn install` of dev.caerus:caerus-dls (Kotlin bindings, the native library inside the jar; checked with unzip)
	$(MAKE) -C bindings/uniffi maven-install RELEASE_LIB=$(PORTABLE)/libcaerus_uniffi.so

test-dist: dist ## Unpack the distribution (no Rust on PATH), run its dls with the example config, take a lock; check metrics vs dashboard/alerts, unit, man, completions, K8s/Docker command lines
	deploy/test-dist.sh $(DIST_TARBALL)

image: release-portable ## Container image caerus-dls:<version> and :latest, no registry: FROM scratch, the dist binary, uid 10001, /data, HEALTHCHECK (starts Debian's Docker engine if none runs)
	deploy/image.sh $(PORTABLE)/dls $(TARGET_DIR)/image

test-image: release-portable ## Build the image, run a three-node cluster of it (host network), lock from the host, stop the leader's container, lock again; skipped (saying why) without an engine
	deploy/test-image.sh $(PORTABLE)/dls

test-wheel: wheel dls-kit ## Install the wheel into a fresh virtualenv (no Rust on PATH) with the README's pip line and run its Python scripts as printed against a real node
	DLS_BIN=$(abspath $(TARGET_DIR))/debug/dls KIT_BIN=$(KIT_BIN) scripts/test-packages/python.sh

test-npm-pack: npm-pack dls-kit ## The README's and docs/es's Node quick starts as printed (no Rust on PATH): npm init, the two tarballs and tsx, npx tsx dls-worker.ts, as .mts too
	DLS_BIN=$(abspath $(TARGET_DIR))/debug/dls KIT_BIN=$(KIT_BIN) scripts/test-packages/node.sh

test-maven-sample: maven-install dls-kit ## The Maven sample (samples/kotlin-lock) and the README's Main.kt from the local repository, in a fresh dir, no Rust on PATH, against a real dls
	DLS_BIN=$(abspath $(TARGET_DIR))/debug/dls KIT_BIN=$(KIT_BIN) CAERUS_DLS_VERSION=$(DLS_VERSION) \
	  scripts/test-packages/maven.sh

test-rust-cli-snippets: dls-kit ## The README's Rust quick start (cargo new next to the checkout, its Cargo.toml lines and main.rs, cargo run) and its dls lock lines, as printed, against a real dls
	DLS_BIN=$(abspath $(TARGET_DIR))/debug/dls KIT_BIN=$(KIT_BIN) scripts/test-packages/rust-cli.sh

test-packages: test-dist test-image test-wheel test-npm-pack test-maven-sample test-rust-cli-snippets test-cross ## Every package installed and used without Rust (server tarball, container image, Python wheel, npm tarballs, Maven artifact), every README quick start as printed, and one cross target (arm64 musl dls under qemu)

# ---- Every platform (issue 41): cross builds with zig, tested here where they can run ------
# `make release-all` builds the packages above for Linux x86_64/arm64 (glibc 2.17 and musl),
# macOS x86_64/arm64 and Windows x64, one loop in scripts/release-all.sh; TARGETS="a b" builds
# some. Not in `make test` (a cold build of all seven is hours on two cores). CI runs one cross
# target end to end, `test-cross` (in test-packages): the arm64 musl dls, built with zig in
# profile ci (dev's code without debug info) rather than dist: its cold build takes 6.8 CPU-minutes
# instead of 12.6 (user+sys; about half that in wall time on two idle cores). Packed by
# release-all.sh, served under qemu-user-static, locked from the host's dls, restarted. The
# archive goes to its own directory, since it is not a release.
TARGETS ?=
RELEASE_ALL_DIR = $(abspath $(TARGET_DIR))/release-all
CROSS_TARGET    = aarch64-unknown-linux-musl
CROSS_DIR       = $(abspath $(TARGET_DIR))/cross

release-all: $(ZIGBUILD_VENV)/bin/cargo-zigbuild dls-debug ## Every package for every platform (Linux x86_64/arm64 glibc 2.17 and musl, macOS x86_64/arm64, Windows x64) into <target dir>/release-all; TARGETS="..." for some
	@scripts/install-deps.sh --release-all
	ZIGBUILD_VENV=$(ZIGBUILD_VENV) HOST_DLS=$(abspath $(TARGET_DIR))/debug/dls RELEASE_ALL_DIR=$(RELEASE_ALL_DIR) \
	  scripts/release-all.sh $(TARGETS)

test-release-all: dls-debug ## Run what `make release-all` built where this machine can: arm64 Linux under qemu, the Windows archive's dls.exe under wine (test-windows' checks), macOS load commands, x86_64 musl natively
	@scripts/install-deps.sh --release-all
	DLS_BIN=$(abspath $(TARGET_DIR))/debug/dls RELEASE_ALL_DIR=$(RELEASE_ALL_DIR) ZIG="$(ZIGBUILD_VENV)/bin/python -m ziglang" \
	  scripts/test-packages/release-all.sh

test-cross: deps $(ZIGBUILD_VENV)/bin/cargo-zigbuild dls-debug ## One cross target end to end, in CI: the arm64 musl dls (zig, profile ci) packed into <target dir>/cross, served under qemu-aarch64-static: a lock from the host's dls, one from its own, a restart on the same data with a later token
	ZIGBUILD_VENV=$(ZIGBUILD_VENV) HOST_DLS=$(abspath $(TARGET_DIR))/debug/dls RELEASE_ALL_DIR=$(CROSS_DIR) \
	  RELEASE_PARTS=dls RELEASE_PROFILE=ci scripts/release-all.sh $(CROSS_TARGET)
	DLS_BIN=$(abspath $(TARGET_DIR))/debug/dls RELEASE_ALL_DIR=$(CROSS_DIR) \
	  scripts/test-packages/release-all.sh $(CROSS_TARGET)

# ---- Benchmarks through the SDKs (issue 21): the lock cycle from Python and Node, binding overhead ----
# Both use the packages as users get them (release wheel, npm tarballs, the Maven jar), installed
# outside the checkout under $(CAERUS_TOOLS_DIR) by bench/sdk/setup.sh on every run, so a fresh
# build is what gets measured.
bench-sdk: release wheel npm-pack ## The bench's lock cycle through caerus.sync (1/32 processes) and @caerus-dev/sdk (1/32 async workers) vs python-etcd3/etcd3 and redis-py/ioredis; one table per language → <target dir>/bench-results/sdk.md
	$(MAKE) -C bench sdk DLS_BIN=$(abspath $(DLS_RELEASE))

bench-binding: release wheel npm-pack maven-install ## p50/p90/p99 of one transaction_status call through Rust, Python (sync, asyncio), Node, Kotlin; overhead vs Rust → <target dir>/bench-results/binding.md
	@echo "==> building dls-call-overhead (the Rust baseline) and the test kit's dls-cluster (release)"
	$(CARGO) build --release -p caerus-bench --bin dls-call-overhead
	$(CARGO) build --release -p caerus-testkit --bin dls-cluster
	bench/sdk/setup.sh python node
	DLS_BIN=$(abspath $(DLS_RELEASE)) KIT_BIN=$(abspath $(TARGET_DIR))/release/dls-cluster \
	  CALL_BIN=$(abspath $(TARGET_DIR))/release/dls-call-overhead CAERUS_DLS_VERSION=$(DLS_VERSION) \
	  bench/sdk/overhead.sh

lint: deps lint-proto ## Clippy with warnings as errors, rustfmt check, no import circles between a crate's files, no server file importing a higher layer, every build with the same dependency features, every README quick-start block marked and run by a test, the OpenAPI document route by route against the HTTP router, and the contract's buf lint/breaking checks
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) fmt --all -- --check
	python3 scripts/import-circles.py
	python3 scripts/layering.py
	python3 scripts/feature-drift.py
	python3 scripts/readme_snippets.py lint
	python3 scripts/openapi-routes.py

sdks: ## Regenerate the committed gRPC clients in sdks/ (Go, Ruby, Python) from proto/ with the pinned tools; Java and C# generate in their own builds
	sdks/generate.sh write

check-sdks: ## Fail if the committed sdks/ differ from a fresh generation of proto/; generate C#, generate and compile Java (sdks/java)
	sdks/generate.sh check

lint-proto: ## buf lint of proto/, and buf breaking against the last released contract
	@eval "$$(sdks/tools.sh)" && buf lint proto && buf breaking proto --against $(PROTO_BASELINE) \
	  && echo "lint-proto: buf lint and buf breaking (against $(PROTO_BASELINE)) passed"

test-go-sample: dls-debug ## Build the Go sample client (samples/go-client) and run it against a real dls
	cd samples/go-client && DLS_BIN=$(abspath $(TARGET_DIR))/debug/dls GOFLAGS=-mod=mod go test -count=1 -v ./...

fmt: ## Format the code
	$(CARGO) fmt --all

clean: cluster-stop ## Remove build output, local data and cluster state
	$(CARGO) clean
	rm -rf dls-data $(CLUSTER_DIR) bindings/python/dist bindings/node/dist
