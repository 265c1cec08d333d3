# capstan — the two commands a new user needs are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
CARGO ?= cargo
export CAPSTAN_CACHE ?= $(HOME)/.cache/capstan
# A compile cache outside the repository when the machine has one (tests/run.sh installs it).
SCCACHE := $(shell command -v sccache 2>/dev/null)
ifneq ($(SCCACHE),)
export RUSTC_WRAPPER ?= $(SCCACHE)
endif

.PHONY: demo test build cluster-build cluster-up cluster-down image bench crds compare-olm bench-olm conformance

## demo: build capstan, start the local environment with its real node, deploy capstan from its image, publish the
## example catalog, install nginx-operator from it and curl the page its Nginx object serves (examples/demo.sh)
demo: build cluster-up
	bash examples/demo.sh

## test: install what the tests need, start the environment, run every test, stop what was started
test:
	bash tests/run.sh

build:
	$(CARGO) build --release --locked

## cluster-build: build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kwok and kubectl (cached)
cluster-build:
	bash tests/cluster/build.sh >/dev/null

## cluster-up / cluster-down: the local control plane, the OCI registry and one real node (state in .cluster/)
cluster-up:
	bash tests/cluster/up.sh all

cluster-down:
	bash tests/cluster/down.sh

## image: build the images (pause, httpd, capstan, nginx-operator) without a container daemon (images/build.sh) and push them to the local registry
image:
	bash images/build.sh

## crds: regenerate manifests/crds from the API types (a test fails when they differ)
crds:
	$(CARGO) run -q -- crds --dir manifests/crds

## bench: the benchmarks (tables printed as markdown; see docs/benchmarks.md)
## (resolve_full needs the whole community-operators-prod catalog: benches/full_catalog.sh builds it
##  under $(CAPSTAN_CACHE)/full-catalog; without it the benchmark says so and is skipped)
bench:
	$(CARGO) bench --locked

## compare-olm: every scenario once under OLM v0 and once under capstan (fresh clusters), objects compared (docs/olm-differences.md)
compare-olm: build
	python3 tests/olm/compare.py

## bench-olm: OLM v0 and capstan side by side (install time, memory, API requests; docs/benchmarks.md)
bench-olm: build
	python3 tests/olm/bench.py

## conformance: OLM v0's own e2e suite (test/e2e, built from the Go module proxy) against capstan on the local
## environment; one line per spec, then `conformance: P passed, F failed, N specs` (FOCUS=REGEX for a subset)
conformance: build
	bash tests/conformance/run.sh
