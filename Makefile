# Baton. `make run` starts a local three-node cluster; `make test` is what CI runs.
GO      ?= go
BIN     := bin
PKGS    := ./...
# Fuzz targets run briefly in `make test`, each for a count of inputs
# (5-10 s each on a 2-core machine). A count, not a duration: with a
# duration, Go 1.26's fuzz coordinator can fail at the deadline with
# "context deadline exceeded" and no failing input (golang/go#75804, fixed
# in Go 1.27; it failed `make test` here once). FUZZTIME, when set, is
# every target's budget, a count or a duration (FUZZTIME=5m to dig deeper).
FUZZTIME ?=

.PHONY: all build run test unit fuzz fmt fmt-check vet lint bench bench-fsm chaos chaos-net chaos-short clean image test-deploy test-deploy-maybe test-manifests test-python test-python310 release test-release

all: build

# VERSION is stamped into both binaries (batond --version, baton version,
# GET /v1/cluster, baton_build_info); the commit comes from git when the
# tree is a checkout (-buildvcs=auto, whatever GOFLAGS says).
VERSION ?= dev
LDFLAGS := -X github.com/baton-dev/baton/cmd/internal/buildinfo.version=$(VERSION)

build:
	$(GO) build -buildvcs=auto -ldflags '$(LDFLAGS)' -o $(BIN)/batond ./cmd/batond
	$(GO) build -buildvcs=auto -ldflags '$(LDFLAGS)' -o $(BIN)/baton ./cmd/baton

## image: the container image $(IMAGE) (Dockerfile): static batond and baton
## (CGO_ENABLED=0) FROM scratch, staged in bin/image, built with the classic
## builder (no buildx needed, nothing pulled)
IMAGE  ?= baton:$(VERSION)
STAGE  := $(BIN)/image
image:
	rm -rf $(STAGE)
	mkdir -p $(STAGE)/bin $(STAGE)/rootfs/etc $(STAGE)/rootfs/tmp $(STAGE)/state/data $(STAGE)/state/tls $(STAGE)/state/ca
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -ldflags '$(LDFLAGS)' -o $(STAGE)/bin/batond ./cmd/batond
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -ldflags '$(LDFLAGS)' -o $(STAGE)/bin/baton ./cmd/baton
	printf 'root:x:0:0:root:/:/nonexistent\nbaton:x:65532:65532:baton:/data:/nonexistent\n' > $(STAGE)/rootfs/etc/passwd
	printf 'root:x:0:\nbaton:x:65532:\n' > $(STAGE)/rootfs/etc/group
	printf 'hosts: files dns\n' > $(STAGE)/rootfs/etc/nsswitch.conf
	chmod 0644 $(STAGE)/rootfs/etc/*
	chmod 1777 $(STAGE)/rootfs/tmp
	chmod 0700 $(STAGE)/state/data $(STAGE)/state/tls $(STAGE)/state/ca
	chmod 0755 $(STAGE)/bin/batond $(STAGE)/bin/baton
	DOCKER_BUILDKIT=0 docker build --quiet --build-arg VERSION=$(VERSION) -t $(IMAGE) .
	@echo "built $(IMAGE)"

## release: VERSION=vX.Y.Z (semantic, with the v): static batond and baton
## (CGO_ENABLED=0) for linux and darwin on amd64 and arm64, one tar.gz per
## platform with LICENSE, README.md and CHANGELOG.md, the image (saved as
## a tar.gz) when a Docker engine answers, and SHA256SUMS, in bin/release
## (deploy/release.sh; docs/versioning.md says what a version promises)
release:
	VERSION=$(VERSION) GO=$(GO) OUT=$(BIN)/release sh deploy/release.sh

## test-release: release.sh for one cross-compiled target (darwin/arm64),
## its archive, checksums and binaries checked (deploy/release_test.sh)
test-release:
	GO=$(GO) sh deploy/release_test.sh

## run: a local three-node cluster on 127.0.0.1:7001-7003 (Ctrl-C stops it)
run: build
	$(BIN)/batond local --nodes 3

## test: everything CI checks; the deploy suite too when a Docker engine answers
test: lint build test-manifests test-release unit test-frameworks test-python test-typescript test-console fuzz test-deploy-maybe

## unit: every package under -race; then fsm again without it, where its
## long random loops run in full and its heap measurements run at all
## (fsm/race_test.go: under -race they run a tenth of their rounds)
unit:
	$(GO) test -race -timeout 20m -count=1 $(PKGS)
	$(GO) test -timeout 10m -count=1 ./fsm/

fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeEntry$$' -fuzztime=$(or $(FUZZTIME),40000x) ./fsm/
	$(GO) test -run='^$$' -fuzz='^FuzzCodecs$$' -fuzztime=$(or $(FUZZTIME),10000x) ./fsm/
	$(GO) test -run='^$$' -fuzz='^FuzzRequestDecoding$$' -fuzztime=$(or $(FUZZTIME),10000x) ./server/

fmt:
	gofmt -w $$(git ls-files '*.go')

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>&1); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

## lint: gofmt, go vet and golangci-lint (the version pinned in
## .ci/lint/go.mod, built into bin/ through the Go module proxy; its
## configuration is .ci/golangci.yml)
GOLANGCI := $(BIN)/golangci-lint
lint: fmt-check vet $(GOLANGCI)
	$(GOLANGCI) run --config .ci/golangci.yml ./...
	cd client/frameworks && $(CURDIR)/$(GOLANGCI) run --config $(CURDIR)/.ci/golangci.yml ./...

$(GOLANGCI): .ci/lint/go.mod .ci/lint/go.sum
	cd .ci/lint && $(GO) build -o $(CURDIR)/$(GOLANGCI) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

## bench: Baton against etcd and PostgreSQL (installs them when absent),
## the Python SDK against the Go SDK and LangGraph's savers (venvs bin/py and
## bin/py-bench, made by bench/python/venv.sh when absent),
## rewriting docs/benchmarks.md (the 1 GiB artifact workload included);
## then the state-machine micro-benchmarks. QUICK=1 for a short run.
bench: build
	QUICK=$(QUICK) bash bench/run.sh
	$(MAKE) bench-fsm

## bench-fsm: state-machine micro-benchmarks (queue claim among 1k..1M tasks)
bench-fsm:
	$(GO) test -run='^$$' -bench=. -benchtime=5000x -timeout 30m ./fsm/

CHAOS_RUNS  ?= 100
CHAOS_SEED  ?= 1
CHAOS_NODES ?= 3
CHAOS_OUT   ?= $(BIN)/chaos
CHAOS_NET_RUNS ?= 30

## chaos: the long chaos schedule (chaos/README.md), faults through
## failpoints, then chaos-net; failing runs are kept in CHAOS_OUT with the
## command that replays them
chaos: build
	$(GO) run ./chaos/cmd/chaos --runs $(CHAOS_RUNS) --seed $(CHAOS_SEED) --nodes $(CHAOS_NODES) --batond $(BIN)/batond --out $(CHAOS_OUT)
	$(MAKE) chaos-net

## chaos-net: CHAOS_NET_RUNS runs with every member in a network namespace
## of its own and every kind of fault, the partitions, one-way loss, delay
## and flapping links made in the network (root; iproute2 and iptables are
## installed when missing)
chaos-net: build
	$(GO) run ./chaos/cmd/chaos --netns --runs $(CHAOS_NET_RUNS) --seed $(CHAOS_SEED) --nodes $(CHAOS_NODES) --batond $(BIN)/batond --out $(CHAOS_OUT)-net

## chaos-short: the chaos part of `make test` on its own
chaos-short:
	$(GO) test -race -count=1 -timeout 10m ./chaos/checker/ ./chaos/faults/ ./chaos/history/ ./chaos/workload/ ./chaos/runner/ ./chaos/netns/

## test-deploy: the image, then deploy/compose.yaml on the Docker engine
## (deploy/dockertest: tour, leader killed and partitioned, rolling restart,
## five nodes, backup restored into a fresh project, the last survivor
## recovered), talking only to 127.0.0.1
test-deploy: image
	BATON_DEPLOY_TESTS=1 BATON_IMAGE=$(IMAGE) $(GO) test -count=1 -v -timeout 15m ./deploy/dockertest/

## test-manifests: deploy/k8s decoded strictly into the Kubernetes API types
## and checked, and deploy/systemd (deploy/manifests, a module of its own so
## that k8s.io/api stays out of go.mod); no cluster needed
test-manifests: build
	cd deploy/manifests && $(GO) vet ./... && BATOND=$(CURDIR)/$(BIN)/batond $(GO) test -count=1 ./...

## test-frameworks: the Go agent-framework adapters (client/frameworks,
## docs/frameworks.md; a module of its own so that Eino stays out of
## go.mod): vet, then the tests under -race against a three-node TLS
## cluster of bin/batond, the one that resumes an Eino graph in another
## process among them
.PHONY: test-frameworks
test-frameworks: build
	cd client/frameworks && $(GO) vet ./... && BATOND=$(CURDIR)/$(BIN)/batond $(GO) test -race -count=1 -timeout 10m ./...

test-deploy-maybe:
	@if docker info >/dev/null 2>&1; then $(MAKE) test-deploy; else \
	echo; echo "################################################################"; \
	echo "###  DEPLOY TESTS SKIPPED: docker info failed                 ###"; \
	echo "###  (no Docker engine here; make test-deploy runs them)      ###"; \
	echo "################################################################"; echo; fi

## test-python: the Python SDK (client/python, docs/python.md): a venv in
## bin/py with the pinned client/python/requirements-dev.txt, the package
## installed from the tree, then ruff, mypy --strict and pytest (its tests
## start a three-node TLS cluster of bin/batond)
PY := $(BIN)/py
.PHONY: test-python
test-python: build
	python3 -m venv $(PY)
	$(PY)/bin/pip install -q --disable-pip-version-check -r client/python/requirements-dev.txt
	$(PY)/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps ./client/python
	cd client/python && $(CURDIR)/$(PY)/bin/ruff check src tests tools
	cd client/python && $(CURDIR)/$(PY)/bin/mypy --strict src/baton src/langgraph
	cd client/python && BATOND=$(CURDIR)/$(BIN)/batond $(CURDIR)/$(PY)/bin/pytest -q -p no:cacheprovider tests
	$(MAKE) test-python310

## test-python310: the same pytest run on Python 3.10, the oldest the SDK
## supports (pyproject.toml), in bin/py310 with client/python/requirements-py310.txt;
## python3.10 from PATH or pyenv. Without one it says so in a banner.
PY310_BIN := $(firstword $(foreach p,python3.10 $(wildcard $(HOME)/.pyenv/versions/3.10*/bin/python3.10),$(shell $(p) -c 'import sys; print("$(p)" if sys.version_info[:2] == (3, 10) else "")' 2>/dev/null)))
.PHONY: test-python310
test-python310: build
ifeq ($(PY310_BIN),)
	@printf '%s\n' '########################################################################' \
	  '# test-python310: no Python 3.10 here (python3.10 or pyenv 3.10.x):' \
	  '# the Python SDK was NOT tested on 3.10 by this run.' \
	  '########################################################################' >&2
else
	$(PY310_BIN) -m venv $(BIN)/py310
	$(BIN)/py310/bin/pip install -q --disable-pip-version-check -r client/python/requirements-py310.txt
	$(BIN)/py310/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps ./client/python
	cd client/python && BATOND=$(CURDIR)/$(BIN)/batond $(CURDIR)/$(BIN)/py310/bin/pytest -q -p no:cacheprovider -rs tests
endif

## test-typescript: the TypeScript SDK and LangGraph.js checkpointer
## (client/typescript, docs/typescript.md): npm ci from the committed
## package-lock.json, tsc --strict, eslint, then vitest (its global setup
## starts a three-node TLS cluster of bin/batond), which runs the SDK's
## tests, docs/typescript.md's examples, the sdk benchmark's driver for a
## second and @langchain/langgraph-checkpoint-validation against BatonSaver
TS := client/typescript
.PHONY: test-typescript
test-typescript: build
	cd $(TS) && npm ci --no-audit --no-fund --loglevel=error
	cd $(TS) && npx tsc -p tsconfig.json && npx tsc -p tsconfig.bench.json && npx tsc -p tsconfig.test.json
	cd $(TS) && npx eslint src test bench
	cd $(TS) && BATOND=$(CURDIR)/$(BIN)/batond npx vitest run

## test-console: the web console (server/console, docs/console.md) in a real
## browser: Chromium from Debian's packages (apt-get installs it when
## missing), playwright-core from the committed package-lock.json (npm ci),
## Node's test runner, against a three-node TLS cluster of bin/batond
CONSOLE_E2E := server/console/e2e
CHROMIUM    ?= /usr/bin/chromium
.PHONY: test-console console-screenshots chromium
test-console: build chromium
	cd $(CONSOLE_E2E) && npm ci --no-audit --no-fund --loglevel=error
	cd $(CONSOLE_E2E) && BATOND=$(CURDIR)/$(BIN)/batond BATON=$(CURDIR)/$(BIN)/baton CHROMIUM=$(CHROMIUM) \
		node --test --test-concurrency=1 console.test.mjs

## console-screenshots: docs/console/*.png, the console's main views on a
## seeded three-node cluster (not part of make test)
console-screenshots: build chromium
	cd $(CONSOLE_E2E) && npm ci --no-audit --no-fund --loglevel=error
	cd $(CONSOLE_E2E) && BATOND=$(CURDIR)/$(BIN)/batond BATON=$(CURDIR)/$(BIN)/baton CHROMIUM=$(CHROMIUM) \
		OUT=$(CURDIR)/docs/console node screenshots.mjs

chromium:
	@if [ -x $(CHROMIUM) ]; then echo "chromium: $$($(CHROMIUM) --version 2>/dev/null)"; else \
	echo "chromium: $(CHROMIUM) is missing; installing Debian's package: apt-get update && apt-get install -y chromium"; \
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; fi

clean:
	rm -rf $(BIN)
