# evalmeter. `make help` lists the targets.

GO ?= go
# How long `make test` fuzzes the metrics engine; `make fuzz FUZZTIME=10m` for longer.
FUZZTIME ?= 20s
# How long `make test` fuzzes each converter.
FUZZTIME_CONVERT ?= 5s
# How long `make test` fuzzes the API's whole HTTP handler (on a real PostgreSQL).
FUZZTIME_HTTP ?= 10s
CONVERT_FUZZERS = FuzzJSONReader FuzzJSONSkip FuzzJUnit FuzzPromptfoo FuzzInspect FuzzInspectEval FuzzTau2 FuzzDeepEval FuzzSWEBench FuzzLmeval FuzzOtel
# Benchmark repetitions for `make bench`; the ratios use the medians.
BENCHCOUNT ?= 6
# The CPU profile the binary is built with (go build's -pgo=auto finds it);
# the benchmarks build with it too, so that they time what ships.
PGO = $(CURDIR)/cmd/evalmeter/default.pgo

LOCALBIN ?= $(CURDIR)/bin
$(LOCALBIN):
	mkdir -p $(LOCALBIN)

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-15s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: fmt
fmt: ## Format the code with gofmt.
	gofmt -w $$(git ls-files '*.go')

.PHONY: verify-fmt
verify-fmt: ## Fail when a file is not gofmt-formatted.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet: ## Run go vet, also on the files of build tags that tests do not build (e2e, cputime).
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/e2e/
	$(GO) vet -tags cputime ./internal/metrics/

.PHONY: generate
generate: ## Generate the DeepCopy methods of the API types (controller-gen, pinned in go.mod).
	$(GO) tool controller-gen object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: manifests
manifests: ## Generate the CRD and RBAC manifests under config/ from the markers, and the chart's copy of the CRD.
	$(GO) tool controller-gen rbac:roleName=manager-role crd paths="./..." output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	cp config/crd/bases/evalmeter.io_clientagreements.yaml charts/evalmeter/files/

.PHONY: verify-generated
verify-generated: generate manifests ## Fail when the committed generated code or manifests are stale.
	@git diff --exit-code -- api config charts || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- api config charts); if [ -n "$$untracked" ]; then echo "generated files not committed: $$untracked"; exit 1; fi

.PHONY: generate-asm
generate-asm: ## Generate internal/jsonindex's AVX2 assembly and its stub with avo (from internal/jsonindex/_asm, a module of its own).
	cd internal/jsonindex && $(GO) generate

.PHONY: verify-asm
verify-asm: generate-asm ## Fail when internal/jsonindex's committed assembly or stub is not what `make generate-asm` generates.
	@git diff --exit-code -- internal/jsonindex/index_amd64.s internal/jsonindex/index_amd64.go || { echo "internal/jsonindex's assembly is stale: run 'make generate-asm' and commit"; exit 1; }

.PHONY: test
test: verify-fmt vet verify-generated verify-asm unit test-purego fuzz ## Run every test: formatting, vet, generated files and assembly, unit and integration tests (race detector), the same without assembly (purego), fuzzing.

.PHONY: test-deps
test-deps: ## Install what the tests need besides Go, once: PostgreSQL, busybox, promtool, and the release that ./ci's tests install.
	@# Once, before test packages start PostgreSQL clusters in parallel (and race for dpkg).
	hack/postgres.sh install
	@# ./ci runs the GitLab template in busybox's sh and wget, as in a small image.
	@command -v busybox >/dev/null || { [ "$$(id -u)" -eq 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox; } \
		|| { echo "busybox is needed by the tests of ./ci: apt-get install busybox"; exit 1; }
	@# Before go test, whose 10-minute bound per package a first build of promtool would eat into.
	@test -x $(LOCALBIN)/promtool || $(MAKE) promtool
	@# The same for the release of make dist that ./ci's tests install (EVALMETER_TEST_RELEASE).
	$(MAKE) -s dist DIST_DIR=$(LOCALBIN)/test-release PLATFORMS=$$($(GO) env GOOS)/$$($(GO) env GOARCH) VERSION=v0.0.0-test

# The environment of go test: the release above, and envtest's kube-apiserver and etcd.
TEST_ENV = EVALMETER_TEST_RELEASE=$(LOCALBIN)/test-release KUBEBUILDER_ASSETS="$$(hack/offline/envtest.sh)"

.PHONY: unit
unit: test-deps ## Run the unit and integration tests (real PostgreSQL, kube-apiserver and etcd) with the race detector and coverage.
	@# -pgo=off: the tests time nothing, and cmd/evalmeter's profile would build every package again.
	$(TEST_ENV) $(GO) test -pgo=off -race -count=1 -coverprofile cover.out ./...

.PHONY: test-purego
test-purego: test-deps ## Run every test again, built with -tags purego: no assembly, neither internal/jsonindex's (its portable builder, as on a CPU without AVX2) nor the standard library's.
	$(TEST_ENV) $(GO) test -pgo=off -tags purego -count=1 ./...

.PHONY: envtest
envtest: ## Build the kube-apiserver and etcd of envtest from source, once (cached in bin/k8s); print their directory.
	@hack/offline/envtest.sh

.PHONY: test-e2e
test-e2e: ## Install the chart on a new kind cluster and run the client flow through it (hack/e2e.sh: Docker, root when offline).
	GO=$(GO) hack/e2e.sh

.PHONY: test-e2e-ha
test-e2e-ha: ## Fail the ledger's CloudNativePG cluster over under load on a new kind cluster and check it against the client's record (hack/e2e.sh E2E_SUITE=ha; E2E_HA_ASYNC=1: the mutation check).
	E2E_SUITE=ha GO=$(GO) hack/e2e.sh

.PHONY: test-e2e-upgrade
test-e2e-upgrade: ## Install the previous release (hack/releases) on a new kind cluster, helm upgrade to this tree under load, downgrade the image, and check the ledger against the client's record (hack/e2e.sh E2E_SUITE=upgrade).
	E2E_SUITE=upgrade GO=$(GO) hack/e2e.sh

.PHONY: test-e2e-dr
test-e2e-dr: ## Back the CloudNativePG ledger up to object storage under load, DELETE from it, restore a new cluster to a time before and check it against the client's record (hack/e2e.sh E2E_SUITE=dr; E2E_DR_TARGET=after-delete: the mutation check, which must fail the ledger check).
	E2E_SUITE=dr GO=$(GO) hack/e2e.sh

.PHONY: fuzz
fuzz: ## Fuzz the metrics engine for FUZZTIME (default 20s) against the JSON Schema and gowebpki/jcs, its fast path against its careful parser, each converter, the receipt verifier and the JSON index's builders (against each other and a reference) for FUZZTIME_CONVERT (5s), and the API handler for FUZZTIME_HTTP (10s) against api/openapi.yaml.
	GO=$(GO) hack/fuzz.sh ./internal/metrics FuzzCompute $(FUZZTIME) 10s
	GO=$(GO) hack/fuzz.sh ./internal/metrics FuzzFastPath $(FUZZTIME_CONVERT) 5s
	GO=$(GO) hack/fuzz.sh ./server FuzzHandler $(FUZZTIME_HTTP) 10s
	GO=$(GO) hack/fuzz.sh ./receipt FuzzVerify $(FUZZTIME_CONVERT) 5s
	GO=$(GO) hack/fuzz.sh ./internal/jsonindex FuzzIndex $(FUZZTIME_CONVERT) 5s
	@for f in $(CONVERT_FUZZERS); do \
		GO=$(GO) hack/fuzz.sh ./convert $$f $(FUZZTIME_CONVERT) 5s || exit 1; \
	done

.PHONY: stats-vectors
stats-vectors: ## Regenerate stats/testdata/compare-vectors.json with hack/stats/vectors.py, an independent Python implementation of compare's statistics.
	python3 hack/stats/vectors.py > stats/testdata/compare-vectors.json

.PHONY: bench
bench: $(LOCALBIN) ## Benchmark the engine beside JSON validators (encoding/json, sonic, go-json, simdjson-go) and SHA-256 on a 130 KB request and on compact 10, 130 and 256 KB bodies; print the ratios.
	$(GO) test -pgo=$(PGO) -run '^$$' -bench '^BenchmarkCompute(Sizes)?$$' -benchmem -count $(BENCHCOUNT) ./internal/metrics | tee $(LOCALBIN)/bench-engine.txt
	status=0; \
	$(GO) run ./hack/bench/benchratio -target Compute/engine -max-allocs 100 \
		-baseline 'Compute/json.Valid<=0.6' -baseline 'Compute/sonic.Valid<=2.5' -baseline 'Compute/json.Unmarshal-map<=0.5' \
		-baseline Compute/go-json.Valid -baseline Compute/sha256 -baseline Compute/careful \
		$$(grep -q '^BenchmarkCompute/simdjson.Parse' $(LOCALBIN)/bench-engine.txt && echo -baseline Compute/simdjson.Parse) \
		$(LOCALBIN)/bench-engine.txt || status=1; \
	for size in 10KB 130KB 256KB; do \
		$(GO) run ./hack/bench/benchratio -target ComputeSizes/$$size/engine -max-allocs 100 \
			-baseline "ComputeSizes/$$size/json.Valid<=0.6" -baseline "ComputeSizes/$$size/sonic.Valid<=2.5" -baseline ComputeSizes/$$size/sha256 \
			-baseline ComputeSizes/$$size/careful \
			$(LOCALBIN)/bench-engine.txt || status=1; \
	done; \
	exit $$status

.PHONY: bench-index
bench-index: $(LOCALBIN) ## Benchmark internal/jsonindex's builders (AVX2 where the CPU has it, portable Go) beside json.Valid on the 10, 130 and 256 KB bodies; print the ratios.
	$(GO) test -run '^$$' -bench '^BenchmarkIndex$$' -benchmem -count $(BENCHCOUNT) ./internal/jsonindex | tee $(LOCALBIN)/bench-index.txt
	for size in 10KB 130KB 256KB; do \
		if grep -q "^BenchmarkIndex/$$size/avx2" $(LOCALBIN)/bench-index.txt; then set -- avx2 -baseline Index/$$size/go; else set -- go; fi; \
		builder=$$1; shift; \
		$(GO) run ./hack/bench/benchratio -target Index/$$size/$$builder -baseline Index/$$size/json.Valid "$$@" $(LOCALBIN)/bench-index.txt || exit; \
	done

.PHONY: bench-api
bench-api: ## Load the API on loopback (real server and durable PostgreSQL) beside a json.Valid reference handler; print throughput, p50/p99, CPU per request (API and PostgreSQL), session opens/s, and throughput at 1, 2 and 4 API processes where the machine has the cores.
	$(GO) run -pgo=$(PGO) ./hack/bench/loadtest -duration 10s -concurrency 32 -replicas 1,2,4

.PHONY: bench-ab
bench-ab: ## Compare the engine's thread CPU time at REV (default HEAD) with the working tree's, in turn, ROUNDS times (default 3): for changes too small for wall-clock medians on a shared machine.
	GO=$(GO) hack/bench/engine-ab.sh $(or $(REV),HEAD)

.PHONY: pgo
pgo: $(LOCALBIN) ## Refresh cmd/evalmeter/default.pgo, the CPU profile the binary is built with, from the engine's benchmarks (docs/development.md#the-profile-guided-build).
	$(GO) test -c -pgo=off -o $(LOCALBIN)/metrics-pgo.test ./internal/metrics
	cd internal/metrics && \
	$(LOCALBIN)/metrics-pgo.test -test.run '^$$' -test.bench '^BenchmarkCompute$$/^engine$$' -test.benchtime 3s -test.cpuprofile $(LOCALBIN)/pgo-vector.prof && \
	$(LOCALBIN)/metrics-pgo.test -test.run '^$$' -test.bench '^BenchmarkComputeSizes$$/./^engine(-reordered|-clocked)?$$' -test.benchtime 1s -test.cpuprofile $(LOCALBIN)/pgo-sizes.prof
	$(GO) tool pprof -proto $(LOCALBIN)/pgo-vector.prof $(LOCALBIN)/pgo-sizes.prof > $(PGO)

.PHONY: bench-convert
bench-convert: ## Convert a generated 200 MB Inspect AI log (.json, and as an .eval zip) and 200 MB of OTLP JSON lines beside Python's json.load of them; print wall times, peak RSS and the ratios.
	$(GO) run ./hack/bench/convertbench -size 200 -runs 3

##@ Build

.PHONY: build
build: $(LOCALBIN) ## Build bin/evalmeter, stamped with the working tree's version (VERSION and COMMIT override it).
	. hack/lib.sh && $(GO) build -ldflags "$$(version_ldflags $(GO))" -o $(LOCALBIN)/evalmeter ./cmd/evalmeter

.PHONY: release-check
release-check: ## Fail when CHANGELOG.md, hack/releases, the chart's version and the git tags disagree (docs/development.md#releases).
	$(GO) run ./hack/release check

.PHONY: dist
dist: ## Build static evalmeter binaries for linux, darwin and windows on amd64 and arm64, and the CI script, into dist/ (DIST_DIR), with SHA256SUMS; PLATFORMS and VERSION choose.
	GO=$(GO) hack/dist.sh

# Helm at go.mod's version, with the Kubernetes version its library was built against.
HELM_VERSION = $(shell awk '$$1 == "helm.sh/helm/v3" { print $$2 }' go.mod)
K8S_MINOR = $(shell awk '$$1 == "k8s.io/client-go" { split($$2, v, "."); print v[2] }' go.mod)
HELM_LDFLAGS = -s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(K8S_MINOR) \
	-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(K8S_MINOR)

.PHONY: helm
helm: $(LOCALBIN) ## Build bin/helm from the module proxy at go.mod's Helm version.
	$(GO) build -trimpath -ldflags "$(HELM_LDFLAGS)" -o $(LOCALBIN)/helm helm.sh/helm/v3/cmd/helm

# promtool at go.mod's Prometheus module version (v0.310.0 is Prometheus 3.10.0), for the
# chart's alert tests. Built in the module's own directory, as its main module: `go install
# ...@version` refuses its go.mod's replace directives, and our go.sum lacks its dependencies.
# remove_all_sd leaves out the service discoveries, which the rule tests never use: the
# first build takes half the time (about 3.5 minutes on 2 cores).
PROMETHEUS_VERSION = $(shell awk '$$1 == "github.com/prometheus/prometheus" { print $$2 }' go.mod)

.PHONY: promtool
promtool: $(LOCALBIN) ## Build bin/promtool from the module proxy at go.mod's Prometheus version.
	@test -n "$(PROMETHEUS_VERSION)" || { echo "go.mod requires no github.com/prometheus/prometheus"; exit 1; }
	dir=$$(cd "$${TMPDIR:-/tmp}" && GOWORK=off GOFLAGS= GO111MODULE=on $(GO) mod download -json github.com/prometheus/prometheus@$(PROMETHEUS_VERSION) \
		| sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$$/\1/p') && test -n "$$dir" && cd "$$dir" && \
	GOWORK=off GOFLAGS='-mod=readonly -buildvcs=false' CGO_ENABLED=0 $(GO) build -tags remove_all_sd -trimpath \
		-ldflags "-s -w -X github.com/prometheus/common/version.Version=$$(cat VERSION)" -o $(LOCALBIN)/promtool ./cmd/promtool

.PHONY: image
image: ## Build the container image IMAGE (default evalmeter:dev) without pulling anything (hack/offline/image.sh; starts hack/offline/docker.sh's engine when needed).
	GO=$(GO) hack/offline/image.sh

.PHONY: run
run: build ## Run the API on localhost:8080 with a throwaway PostgreSQL and a dev client; Ctrl-C stops it.
	hack/run.sh
