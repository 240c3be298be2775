# winready: make help lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

export GONOSUMDB ?= github.com/tigera,github.com/projectcalico
K8S_VERSION ?= 1.37.2
ENVTEST_ASSETS := $(CURDIR)/bin/k8s/$(K8S_VERSION)
CRDS := $(CURDIR)/bin/crds/.operator-v1.43.0-2
IMG ?= winready:dev
# The release's version and the registry its install.yaml points at.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REGISTRY ?= ghcr.io/winready
GINKGO_FLAGS ?=
# Flags of the Ginkgo CLI for make test-controllers (--focus, --label-filter, -v).
GINKGO_CLI_FLAGS ?=

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: generate
generate: ## Regenerate deepcopy code.
	go tool controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: ## Regenerate the CRD and RBAC manifests from the code's markers.
	go tool controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	go tool controller-gen rbac:roleName=winready-manager paths=./controllers/... output:rbac:artifacts:config=config/rbac

.PHONY: docs
docs: manifests ## Regenerate docs/api.md, the API reference, from the CRD.
	go run ./hack/apidocs > docs/api.md

.PHONY: verify-generated
verify-generated: generate manifests docs ## Fail when generated files are stale.
	@git diff --exit-code -- api config docs/api.md || { echo "generated files are stale: run make generate manifests docs and commit"; exit 1; }

.PHONY: fmt
fmt: ## Format the code.
	gofmt -s -w .

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

# golangci-lint is pinned in hack/tools/go.mod, a module of its own so that the
# main go.mod does not carry its dependencies; .golangci.yml is its config.
GOLANGCI_LINT := go tool -modfile=$(CURDIR)/hack/tools/go.mod golangci-lint

# The files of every package depend one way (hack/filegraph), the
# simulator's (test/calicosim) aside, which do not yet.
ONE_WAY_PKGS = $$(go list ./... | grep -v '/test/calicosim$$')

# The test suites that are modules of their own (their own go.mod: a
# platform team's CI, Flux's and Argo CD's types, Prometheus, cosign, Helm):
# make lint holds their go.mod tidy and vets them, their make targets run them.
TEST_MODULES := test/ci-example test/gitopsdocs test/prometheus hack/sign test/chart

.PHONY: lint
lint: ## Run golangci-lint (.golangci.yml) on the main module, go vet and go mod tidy -diff on the test modules; check that the files of each package but the simulator's depend one way.
	cd hack/tools && { go mod tidy -diff || { echo "hack/tools: run go mod tidy there and commit"; exit 1; }; }
	$(GOLANGCI_LINT) run ./...
	for m in $(TEST_MODULES); do (cd $$m && { go mod tidy -diff || { echo "$$m: run go mod tidy there and commit"; exit 1; }; } && go vet ./...) || exit 1; done
	go run ./hack/filegraph $(ONE_WAY_PKGS)

.PHONY: build
build: ## Build the operator binary into bin/winready.
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/winready/winready/internal/version.Version=$(VERSION)" -o bin/winready .

.PHONY: envtest-assets
envtest-assets: $(ENVTEST_ASSETS)/kube-apiserver $(CRDS) ## Build kube-apiserver and etcd from the Go module proxy, fetch Calico's CRDs.

$(ENVTEST_ASSETS)/kube-apiserver:
	K8S_VERSION=$(K8S_VERSION) bash hack/envtest-assets.sh

$(CRDS):
	bash hack/calico-crds.sh

# The packages whose tests start an envtest control plane (each its own, on
# free ports): they run again every time. The others keep Go's test cache.
ENVTEST_PKGS := ./api/v1alpha1/ ./config/rbac/ ./test/admission/ ./hack/release/ ./internal/calico/ ./internal/cli/ ./internal/plugin/ ./test/calicosim/ ./test/kit/
# The end-to-end scenarios on the simulator, as a smoke test of winready as
# installed (its manifest, its binary under its ServiceAccount): the whole
# set runs against the real Tigera operator in make e2e.
E2E_SMOKE := Windows-ready (keeps Windows nodes out|migrates to Ready replacing|rolls back to exactly)
TEST_P ?= 2
# Ginkgo's CLI (pinned in hack/tools/go.mod beside golangci-lint) runs the
# two tiers of winready's specs: the controllers suite (the manager: watches,
# timing, at work under RBAC and admission, restarts, the audit log; what
# config/ alone decides is in api/v1alpha1 and test/admission, ENVTEST_PKGS)
# in CONTROLLERS_PROCS processes and the pass-by-pass tier (test/passes: what
# a pass decides) in PASSES_PROCS. Each process starts its own control plane (and simulator) in
# BeforeSuite and takes the next spec as it frees up, so no state is shared
# between processes. Two processes, one per core: the suite alone took 150 s
# and 237 s of CPU in two, 158 s and 296 s in three (each process's specs
# then run slower, and every wait polls longer), and make test runs other
# parts beside it.
GINKGO := go tool -modfile=$(CURDIR)/hack/tools/go.mod ginkgo
CONTROLLERS_PROCS ?= 2
# The pass-by-pass tier in one: it was 119 s of CPU alone in one process, 132
# in two, and make test took 5m32s and 639 s of CPU with it in one where it
# took 6m24s and 743 s with it in two (the two cores are the limit: every
# process beside another runs slower and spends more CPU for the same work).
PASSES_PROCS ?= 1
# The targets that run tests (make test-repeat aside) share the settings below.
TEST_TARGETS := test test-controllers test-passes test-envtest test-pure test-smoke kit-example chart-test rules-test \
	gitops-docs-test sign-test test-oldest
# The tests' Go processes (the test binaries, and kube-apiserver and etcd,
# which inherit the environment) collect garbage at 400% heap growth rather
# than 100%: about a third less CPU on two cores, for memory the machine has.
TEST_GOGC ?= 400
$(TEST_TARGETS) test-repeat: \
	export GOGC = $(TEST_GOGC)
# Every envtest control plane of the tests gets two minutes to start, as
# test/kit gives its own: on two cores busy with other suites, kube-apiserver
# took longer than envtest's default 20 s (make test-repeat beside .ci/run).
$(TEST_TARGETS) test-repeat: \
	export KUBEBUILDER_CONTROLPLANE_START_TIMEOUT = 2m
# Each control plane starts from a snapshot of etcd with its CRDs installed
# (test/kit's Env), made by the first start of each set of CRDs and kept in
# bin/: installing Calico's CRDs was half of a start's CPU, and make test
# starts 23 control planes. make e2e starts one per suite run, which on a
# clean clone would pay for a snapshot it never uses again: it installs.
ENVTEST_SNAPSHOTS ?= $(CURDIR)/bin/envtest-snapshots
$(TEST_TARGETS) test-repeat: \
	export WINREADY_ENVTEST_SNAPSHOTS = $(ENVTEST_SNAPSHOTS)
# make test's control planes serve every read from etcd (test/kit's
# APIServerFlagsEnv): a cluster's watch cache serves thousands of clients, a
# suite's a handful, and without it kube-apiserver and etcd spend a fifth
# less CPU. make e2e keeps it, as clusters do.
ENVTEST_APISERVER_FLAGS ?= --watch-cache=false
$(TEST_TARGETS) test-repeat: \
	export WINREADY_ENVTEST_APISERVER_FLAGS = $(ENVTEST_APISERVER_FLAGS)
# The test binaries of the packages that start a control plane are kept
# (controllers/controllers.test, test/passes/passes.test, bin/tests/):
# go test links each again on every run, go test -c -o only when its inputs
# changed (hack/test-binaries.sh).
# The test binaries are linked without DWARF (stack traces keep their
# function names and lines): every envtest package links a binary of about
# 100 MB on each run, and DWARF is a third of its link time.
TEST_GOFLAGS ?= -ldflags=-w
$(TEST_TARGETS) test-repeat: \
	export GOFLAGS += $(TEST_GOFLAGS)
# They are built without cgo too, as every binary of winready is: the
# plugin package that kustomize's plugin loader imports would otherwise link
# each binary that renders config/ through the host's linker, a third slower.
# The race detector of make test-repeat needs cgo and keeps it.
$(TEST_TARGETS): \
	export CGO_ENABLED = 0
# How many of make test's parts run at once: the controllers suite beside a
# stream of the others.
TEST_JOBS ?= 3

.PHONY: test
test: envtest-assets ## Run every test on envtest (an as-installed smoke test of the end-to-end scenarios on the simulator included), in parallel.
	$(MAKE) --no-print-directory -j $(TEST_JOBS) --output-sync=target test-controllers test-passes test-envtest test-pure test-smoke \
		kit-example rules-test gitops-docs-test chart-test sign-test

# The oldest Kubernetes minor winready claims (internal/version.MinKubernetes,
# which internal/version's tests hold this to), at a patch the Go module proxy
# serves: make test-oldest builds its control plane into bin/k8s/<version>/ as
# envtest-assets builds K8S_VERSION's (about 10 minutes cold on two cores) and
# runs the core tier on it: the admission suite, the CRD's schema and CEL
# rules (api/v1alpha1) and the controllers' specs labelled core (the
# migration, the Windows join gate, a rollback). make test
# runs everything on K8S_VERSION, the newest.
K8S_OLDEST ?= 1.35.8
OLDEST_ASSETS := $(CURDIR)/bin/k8s/$(K8S_OLDEST)

$(OLDEST_ASSETS)/kube-apiserver:
	K8S_VERSION=$(K8S_OLDEST) bash hack/envtest-assets.sh

.PHONY: test-oldest
test-oldest: $(OLDEST_ASSETS)/kube-apiserver $(CRDS) ## The core tier (admission, migration, join gate, rollback) on K8S_OLDEST, the oldest Kubernetes winready claims.
	KUBEBUILDER_ASSETS=$(OLDEST_ASSETS) go test ./test/admission/ ./api/v1alpha1/ -count=1 -timeout 10m
	KUBEBUILDER_ASSETS=$(OLDEST_ASSETS) $(GINKGO) -p --procs=$(CONTROLLERS_PROCS) --timeout=15m --label-filter=core \
		$(GINKGO_CLI_FLAGS) ./controllers/

.PHONY: test-pure
test-pure: ## The packages that start no control plane (Go's test cache kept).
	go test $$(go list ./... | grep -v -e '/test/e2e$$' -e '/controllers$$' -e '/test/passes$$' $(foreach p,$(ENVTEST_PKGS),-e '$(patsubst ./%/,%,$(p))$$')) -p $(TEST_P) -timeout 10m

.PHONY: test-controllers
test-controllers: envtest-assets ## The controllers suite, in CONTROLLERS_PROCS processes.
	go test -c -o controllers/controllers.test ./controllers/
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) $(GINKGO) -p --procs=$(CONTROLLERS_PROCS) --timeout=30m $(GINKGO_CLI_FLAGS) ./controllers/controllers.test

.PHONY: test-passes
test-passes: envtest-assets ## The pass-by-pass tier (test/passes), in PASSES_PROCS processes.
	go test -c -o test/passes/passes.test ./test/passes/
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) $(GINKGO) -p --procs=$(PASSES_PROCS) --timeout=30m $(GINKGO_CLI_FLAGS) ./test/passes/passes.test

.PHONY: test-envtest
test-envtest: envtest-assets ## The other packages that start a control plane of their own.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) TEST_P=$(TEST_P) TEST_FLAGS='-test.timeout=30m $(GINKGO_FLAGS)' \
		bash hack/test-binaries.sh $(ENVTEST_PKGS)

.PHONY: test-smoke
test-smoke: envtest-assets ## The end-to-end smoke test: winready as installed, on the simulator.
	go build -o bin/winready-test .
	go test -c -o bin/tests/ ./test/e2e/
	cd test/e2e && KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) WINREADY_BIN=$(CURDIR)/bin/winready-test \
		$(CURDIR)/bin/tests/e2e.test -test.paniconexit0 -test.count=1 -test.timeout=10m -ginkgo.focus '$(E2E_SMOKE)'

# Flakes found, not hidden: the controllers' packages N times in a row, in
# random order, with the race detector.
N ?= 5
.PHONY: test-repeat
test-repeat: envtest-assets ## Run the controllers' and the pass-by-pass tier's envtest suites N times (N=5) with -race and a random spec order.
	for i in $$(seq $(N)); do echo "run $$i of $(N)"; \
		KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) $(GINKGO) -p --procs=$(CONTROLLERS_PROCS) --race --randomize-all --timeout=60m \
			./controllers/ ./test/passes/ ./test/calicosim/ || exit 1; done

.PHONY: kit-example
kit-example: envtest-assets ## Run test/ci-example: a platform team's CI suite, a module of its own, on the test kit.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) WINREADY_CALICO_CRDS=$(CURDIR)/bin/crds TEST_FLAGS=-test.timeout=10m \
		bash hack/test-binaries.sh -C test/ci-example ./...

.PHONY: gitops-docs-test
gitops-docs-test: ## Decode docs/gitops.md's and docs/fleet.md's manifests into Flux's and Argo CD's API types (test/gitopsdocs, a module of its own).
	bash hack/test-binaries.sh -C test/gitopsdocs ./...

.PHONY: rules-test
rules-test: ## Evaluate config/prometheus's alerts with Prometheus's PromQL engine (test/prometheus, a module of its own).
	bash hack/test-binaries.sh -C test/prometheus ./...

.PHONY: sign-test
sign-test: ## Sign an image index on an in-process registry and blobs with hack/sign, verify them with cosign's own code (hack/sign, a module of its own).
	bash hack/test-binaries.sh -C hack/sign ./...

.PHONY: chart-test
chart-test: envtest-assets ## Render the Helm chart hack/release generates with the Helm SDK, compare it with install.yaml and install it on envtest (test/chart, a module of its own).
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) bash hack/test-binaries.sh -C test/chart ./...

.PHONY: chart
chart: image ## Generate the Helm chart from config/ into dist/chart/winready and package it (dist/winready-<version>.tgz), beside install.yaml.
	go run ./hack/release manifests --version $(VERSION) --registry $(REGISTRY) --out dist

.PHONY: demo
demo: envtest-assets ## Run the operator on a local control plane with a simulated Calico cluster.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) go run ./test/demo $(DEMO_ARGS)

# The Tigera operators make e2e runs against, comma-separated (each built from
# the Go module proxy into bin/e2e/<version>/): the core scenarios against each,
# the whole suite against the newest.
E2E_OPERATORS ?= v1.43.0

.PHONY: e2e-binaries
e2e-binaries: envtest-assets ## Build the real Tigera operators (E2E_OPERATORS), kube-controller-manager, kube-scheduler and kwok.
	OPERATOR_VERSION=$(E2E_OPERATORS) bash hack/e2e-binaries.sh

# The manifest make e2e installs winready from: a release's install.yaml
# (E2E_MANIFEST=dist/install.yaml after make release); the Helm chart
# (E2E_MANIFEST=chart: generated from config/ as make chart does, rendered
# with the Helm SDK by test/chart's cmd/render; or a chart package's path,
# dist/winready-<version>.tgz); else config/default.
E2E_MANIFEST ?=

# The node counts the timing scenario (the manual runbook and winready, timed
# on the same control plane) runs at: make e2e at the reference cluster's 3.
E2E_TIMING_NODES ?= 3

.PHONY: e2e
e2e: e2e-binaries build $(ENVTEST_ASSETS)/kubectl $(CRDS) ## Run the end-to-end scenarios against the real Tigera operators of E2E_OPERATORS.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) E2E_MANIFEST=$(E2E_MANIFEST) E2E_TIMING_NODES=$(E2E_TIMING_NODES) \
		E2E_OPERATORS=$(E2E_OPERATORS) GINKGO_FLAGS='$(GINKGO_FLAGS)' bash hack/e2e-matrix.sh

.PHONY: e2e-timing
e2e-timing: ## Only the timing scenario, at 3 and 30 paced nodes: the runbook's and winready's wall times and their ratio.
	$(MAKE) e2e E2E_TIMING_NODES=3,30 GINKGO_FLAGS='-ginkgo.label-filter=timing -ginkgo.v'

.PHONY: bench
bench: envtest-assets build $(ENVTEST_ASSETS)/kubectl ## Benchmarks: migration at 10 to 5,000 nodes against the floor and the scripted runbook, the rounds of the UDP probe and the pod network check through the API server, pairing and judging, and a pod network check round.
	go test ./internal/round/ ./internal/probe/ -run '^$$' -bench . -benchmem
	go test ./controllers/ -run '^$$' -bench BenchmarkPodCheckRound -benchtime=1x
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) go run ./test/bench --kubectl $(ENVTEST_ASSETS)/kubectl $(BENCH_ARGS)

$(ENVTEST_ASSETS)/kubectl:
	K8S_VERSION=$(K8S_VERSION) bash hack/envtest-assets.sh kubectl

.PHONY: docker-build
docker-build: ## Build the container image with the Dockerfile (needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$$(git rev-parse HEAD) -t $(IMG) .

.PHONY: dockerfile-check
dockerfile-check: ## Compile what the Dockerfile's build stage copies, without a Docker engine.
	bash hack/dockerfile-check.sh

.PHONY: image
image: ## Build the image without a Docker engine: dist/image (OCI layout, linux/amd64 and linux/arm64).
	go run ./hack/release image --version $(VERSION) --out dist

# make release signs the release when COSIGN_KEY names a cosign private key
# file (cosign generate-key-pair) and COSIGN_PASSWORD is its password: the
# image index (dist/signature, an OCI layout make publish pushes to the
# image's sha256-<digest>.sig tag), the chart package and SHA256SUMS (.sig
# beside each), with the public key as dist/winready.pub (hack/sign). Without
# COSIGN_KEY it writes the release unsigned and says so.
.PHONY: release
release: ## Write the release into dist/: image, install.yaml pinned by digest, the Helm chart, binaries, plugin archives, krew manifest, SBOM, SHA256SUMS; signed with COSIGN_KEY when set.
	rm -rf dist
	go run ./hack/release release --version $(VERSION) --registry $(REGISTRY) --out dist

# The tools publish runs, from the Go module proxy at pinned versions.
CRANE := go run github.com/google/go-containerregistry/cmd/crane@v0.22.1
HELM := go run helm.sh/helm/v3/cmd/helm@v3.22.0
# --plain-http for a registry on localhost (hack/release-rehearsal.sh).
HELM_PUSH_FLAGS ?=

.PHONY: publish
publish: ## Push dist/ (after make release): the image index with both platforms (crane push of the OCI layout, which keeps the digest install.yaml pins), its cosign signature when signed, and the chart (helm push). REGISTRY_USER and REGISTRY_PASSWORD log in.
	@if [ -n "$${REGISTRY_USER:-}" ]; then \
		echo "$$REGISTRY_PASSWORD" | $(CRANE) auth login "$(firstword $(subst /, ,$(REGISTRY)))" -u "$$REGISTRY_USER" --password-stdin; \
		echo "$$REGISTRY_PASSWORD" | $(HELM) registry login "$(firstword $(subst /, ,$(REGISTRY)))" -u "$$REGISTRY_USER" --password-stdin; \
	fi
	$(CRANE) push dist/image $(REGISTRY)/winready:$(VERSION)
	test "$$($(CRANE) digest $(REGISTRY)/winready:$(VERSION))" = "$$(cat dist/image.digest)"
	if [ -d dist/signature ]; then \
		$(CRANE) push dist/signature "$(REGISTRY)/winready:sha256-$$(cut -d: -f2 dist/image.digest).sig"; \
	else echo "unsigned: no dist/signature (make release without COSIGN_KEY), no signature pushed"; fi
	$(HELM) push $(HELM_PUSH_FLAGS) dist/winready-*.tgz oci://$(REGISTRY)/charts

.PHONY: release-check
release-check: release envtest-assets ## Build the release and check it: image config, its binary runs, a rebuild has the same digest, install.yaml applies.
	WINREADY_DIST=$(CURDIR)/dist WINREADY_VERSION=$(VERSION) WINREADY_REGISTRY=$(REGISTRY) KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) \
		go test ./hack/release/ -count=1 -run TestTheReleaseAsBuilt -v
	cd test/krew && { go mod tidy -diff || { echo "test/krew: run go mod tidy there and commit"; exit 1; }; }
	cd test/krew && WINREADY_DIST=$(CURDIR)/dist go test ./... -count=1 -v
	cd test/chart && WINREADY_DIST=$(CURDIR)/dist WINREADY_REGISTRY=$(REGISTRY) KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) go test ./... -count=1 -v
