# kubectl-bundle. `make demo` and `make test` are the two commands a fresh machine needs.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c

GO        ?= go
PREFIX    ?= $(HOME)/.local/bin
BIN       := $(CURDIR)/bin
TESTBIN   := $(BIN)/testbin
PLUGINS   := verify journal gate slot switch
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS   := -s -w -X github.com/kubectl-bundle/kubectl-bundle/internal/cli.Version=$(VERSION)
# The real zarf the tests and the benchmark run: pinned in hack/tools/go.mod.
ZARF_VERSION := $(shell awk '$$1 != "//" {for (i = 1; i < NF; i++) if ($$i == "github.com/zarf-dev/zarf") {print $$(i+1); exit}}' hack/tools/go.mod)
ZARF_STAMP   := $(TESTBIN)/.zarf-$(ZARF_VERSION)-$(shell cat hack/tools/go.mod hack/tools/go.sum | sha256sum | cut -c1-12)
# The real control plane envtest starts: pinned in hack/tools/node/go.mod, the
# module the kind node image's binaries build from (one compile serves both).
KUBE_VERSION := $(shell awk '$$1 != "//" {for (i = 1; i < NF; i++) if ($$i == "k8s.io/kubernetes") {print $$(i+1); exit}}' hack/tools/node/go.mod)
KUBE_STAMP   := $(TESTBIN)/.kube-$(KUBE_VERSION)-$(shell cat hack/tools/node/go.mod hack/tools/node/go.sum | sha256sum | cut -c1-12)
FUZZTIME  ?= 10s
# Tool builds are cached outside the clone by pin (hack/tools/cached.sh): KEY = tool, version, tools module hash, Go version.
GOVERSION := $(shell $(GO) env GOVERSION)
modhash    = $(shell cat $(1)/go.mod $(1)/go.sum | sha256sum | cut -c1-12)
CACHED     = hack/tools/cached.sh
KB_CACHE  := $(or $(KUBECTL_BUNDLE_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kubectl-bundle)

.PHONY: all build demo demo-kind docker docker-stop docs e2e-kind e2e-kind-adopt e2e-kind-capd e2e-kind-core e2e-kind-flux images release-snapshot releasetools test unit testbin install uninstall fuzz bench bench-e2e testdata trusted-root vet lint clean

all: build

## build: the plugins into bin/, with both kubectl spellings of each name
build:
	@mkdir -p $(BIN)
	@for p in $(PLUGINS); do \
	  CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-bundle-$$p ./cmd/kubectl-bundle-$$p; \
	  ln -sf kubectl-bundle-$$p $(BIN)/kubectl-bundle_$$p; \
	  ln -sf kubectl-bundle-$$p $(BIN)/kubectl_complete-bundle-$$p; \
	  ln -sf kubectl-bundle-$$p $(BIN)/kubectl_complete-bundle_$$p; \
	done

## demo: the blue/green flow on four local API servers and the real zarf: v1 into slot a, blue-green.sh apply v2 (gate, switch), then revert
demo: build testbin
	$(GO) run ./hack/demo

## e2e-kind: the plugins and scripts on real parts: a Docker engine (make docker's), real kind clusters from the node image built
## offline (hack/images/build.sh, cached by pin under ~/.cache/kubectl-bundle), the slots' registries, zarf deploying signed packages;
## the core (blue-green over two real clusters; make test runs it), then in-place.sh, recreate.sh and a kill inside a real deploy,
## then adopt (e2e-kind-adopt), then Flux on the bench (e2e-kind-flux)
e2e-kind: build testbin $(TESTBIN)/kind
	hack/docker/ensure.sh run hack/e2e-kind.sh all
	hack/docker/ensure.sh run hack/capd/run.sh

## e2e-kind-capd: the design's open questions on real Cluster API (issue 29): the bench's Cluster API and CAPD built offline from
## hack/tools/capi (hack/images/capi.sh, cached by pin), a management kind cluster creating a CAPD workload cluster, and the
## experiments in hack/capd/ (survival of the workload when the management cluster goes); part of e2e-kind, not of test
e2e-kind-capd: build $(TESTBIN)/kind
	hack/docker/ensure.sh run hack/capd/run.sh

# kind's own command, from the main module's pinned kind (the experiments create management clusters with it).
$(TESTBIN)/kind: go.mod go.sum
	@mkdir -p $(TESTBIN)
	nice -n 19 hack/lowcpu.sh env CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $@ sigs.k8s.io/kind

## demo-kind: the demo's story on two real kind clusters (a Docker engine of its own, images built offline): the first install of v1
## in slot a by hand, blue-green.sh apply v2 into slot b, revert, apply again, accept; each switch proved from both sides
demo-kind: build testbin
	hack/docker/ensure.sh run hack/e2e-kind.sh core

## e2e-kind-adopt: the part of e2e-kind that adopts a site built as offline-run.sh builds it (kind cluster, registry container,
## zarf init and deploy by the real zarf), then blue-green.sh apply/revert/apply/accept over it (hack/e2e-kind-adopt.sh)
e2e-kind-adopt: build testbin
	hack/docker/ensure.sh run hack/e2e-kind.sh adopt

## e2e-kind-flux: the part of e2e-kind that runs Flux on the bench: blue-green.sh apply of a krops-shaped package that carries Flux
## (source-controller and kustomize-controller built offline from hack/tools/flux by hack/flux/images.sh, cached by pin); each slot's
## Flux reconciles the config artifact from the slot's registry; slot a's Cluster keeps the default name, slot b's gets its own (hack/e2e-kind-flux.sh)
e2e-kind-flux: build testbin $(TESTBIN)/kind
	hack/docker/ensure.sh run hack/e2e-kind.sh flux

## e2e-kind-core: the part of e2e-kind that make test runs
e2e-kind-core: build testbin
	hack/docker/ensure.sh run hack/e2e-kind.sh core

## images: the bench's images (kind node, registry, workload), built offline from the pins and saved as archives in the cache
images:
	hack/docker/ensure.sh run hack/images/build.sh

## testbin: the real zarf, kube-apiserver and etcd, built from the pinned tools modules; rebuilt only when a pin changes
# The kube build first: the images' binaries wait for it (hack/images/build.sh).
testbin: $(KUBE_STAMP) $(ZARF_STAMP)
$(ZARF_STAMP): hack/tools/go.mod hack/tools/go.sum
	@mkdir -p $(TESTBIN)
	@echo "building zarf $(ZARF_VERSION) into $(TESTBIN) (cold: several minutes; cached after)"
	$(CACHED) zarf-$(ZARF_VERSION)-$(call modhash,hack/tools)-$(GOVERSION) $(TESTBIN) bash -c 'cd hack/tools && CGO_ENABLED=0 $(GO) build -trimpath \
	  -ldflags "-s -w -X github.com/zarf-dev/zarf/src/config.CLIVersion=$(ZARF_VERSION)" \
	  -o "$$OUT/zarf" github.com/zarf-dev/zarf'
	@test "$$($(TESTBIN)/zarf version)" = "$(ZARF_VERSION)" || { echo "built zarf does not report $(ZARF_VERSION)" >&2; exit 1; }
	@rm -f $(TESTBIN)/.zarf-*
	@touch $@

$(KUBE_STAMP): hack/tools/node/go.mod hack/tools/node/go.sum
	@mkdir -p $(TESTBIN)
	@echo "building kube-apiserver $(KUBE_VERSION) and etcd into $(TESTBIN) (cold: several minutes; cached after)"
	@mkdir -p $(KB_CACHE)
	flock $(KB_CACHE)/.node-build.lock $(CACHED) kube-$(KUBE_VERSION)-$(call modhash,hack/tools/node)-$(GOVERSION) $(TESTBIN) bash -c 'cd hack/tools/node && CGO_ENABLED=0 $(GO) build -trimpath \
	  -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(KUBE_VERSION)))" \
	  -o "$$OUT/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver && \
	  CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o "$$OUT/etcd" go.etcd.io/etcd/server/v3'
	@rm -f $(TESTBIN)/.kube-*
	@touch $@

## test: everything: vet, unit and testscript suites against the real zarf, kubectl and API server, a short fuzz of each target
## (a count, not a duration: a duration can end the fuzzer mid-input on a loaded machine and fail with "context deadline exceeded"),
## and the core of e2e-kind on a real Docker engine and real kind clusters (installs Debian's docker.io if missing)
# The tests build as the release does (CGO_ENABLED=0, -trimpath): on a cold
# cache every package compiles once for linux, not once for the tests and
# again for the release test's archives and make install.
# The order is made for a cold machine (2 cores), where building is most of
# the time:
# - e2e-kind-core starts at once in the background: Docker, then the images
#   (their binaries at nice 10, so they take the cores the tool builds leave
#   idle), then it waits for KIND_GO and runs its tests beside go test. Its
#   output goes to KIND_LOG and is printed when it ends.
# - the tools, the plugins and lint build one after another (TOOLS_JOBS=1):
#   a cold run is CPU-bound from start to end (99% busy on 2 cores), and
#   3 parallel jobs only made zarf, the longest, take 3 times as long
#   (docs/benchmarks.md).
# - go test runs with -vet=off: go vet ./... (every analyzer) has just run.
# - go test -json, through hack/testtimes: the output as without -json (a
#   test's lines only when it fails), then each package's wall time and the
#   slowest tests, so a run near the alarm says what to look at.
# - go test's alarm (GO_TEST_TIMEOUT) is 75m, inside CI's 90: the e2e
#   package is CPU-bound, and with the node image building beside it (its
#   first run on a machine) it passed 45 minutes and was killed mid-run.
# - go test and the fuzz run at a quarter of the default CPU weight
#   (hack/lowcpu.sh): beside them, a kind node's control plane starved on
#   2 cores (leader elections lost, zarf's agent failing its probes) and
#   the kind part failed on a machine that was only busy.
# Either part failing fails the run.
GO_TEST_TIMEOUT ?= 75m
# The process-level TestInvariant (the binaries and the scripts, 0.2-1
# operations/s) runs this long in make test; the in-process model
# (internal/model TestModel) draws its 60,000 operations (at most 170 s)
# there in one worker process a core (KB_MODEL_WORKERS=max), and make
# fuzz runs both for INVARIANT_BUDGET.
INVARIANT_TEST_BUDGET ?= 60s
# The model runs first, alone, while the kind part waits for the go tests
# (KIND_GO): both cores are its own, and it prints how many operations it
# drew; go test ./... then skips it.
MODEL_TEST = CGO_ENABLED=0 KB_INVARIANT_EXPLORE=report KB_MODEL_WORKERS=max $(GO) test -trimpath -vet=off -count=1 -run '^TestModel$$' -v ./internal/model
# The e2e suite runs the strategy scripts under dash (POSIX sh, as Debian's
# /bin/sh; macOS's is bash 3.2): KB_E2E_SH="bash --posix" runs them under
# bash's POSIX mode instead, KB_E2E_SH= as shipped (#!/bin/sh).
KB_E2E_SH ?= dash
# Every package, tests included, vetted for the first site's host (macOS
# on arm64): nothing may need Linux-only calls or /proc to build there.
DARWIN_VET := GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet -trimpath ./...
KIND_LOG   := $(TESTBIN)/e2e-kind-core.log
KIND_GO    := $(TESTBIN)/.e2e-kind-go
TOOLS_JOBS ?= 1
test:
	@mkdir -p $(TESTBIN); rm -f $(KIND_LOG).rc $(KIND_GO)
	@echo "e2e-kind-core starts now in the background: Docker and the images first, its tests once the tools are built (output: $(KIND_LOG), printed when it ends)"
	@( krc=0; hack/docker/ensure.sh run hack/e2e-kind.sh core --after $(KIND_GO) >$(KIND_LOG) 2>&1 || krc=$$?; echo $$krc >$(KIND_LOG).rc ) & kind=$$!; \
	trap 'echo stop >$(KIND_GO); wait $$kind' INT TERM; \
	tools() { $(MAKE) --no-print-directory -j$(TOOLS_JOBS) -Oline testbin releasetools lint build && \
	  echo 'CGO_ENABLED=0 $(GO) vet -trimpath ./...' && CGO_ENABLED=0 $(GO) vet -trimpath ./... && \
	  echo '$(DARWIN_VET)' && $(DARWIN_VET) && \
	  CGO_ENABLED=0 $(GO) build -trimpath -o $(TESTBIN)/testtimes ./hack/testtimes; }; \
	if ! tools; then echo stop >$(KIND_GO); echo "waiting for e2e-kind-core to stop"; wait $$kind; exit 1; fi; \
	rc=0; echo "$(MODEL_TEST)"; $(MODEL_TEST) || rc=$$?; \
	echo go >$(KIND_GO); \
	echo 'CGO_ENABLED=0 KB_INVARIANT_EXPLORE=report KB_INVARIANT_BUDGET=$(INVARIANT_TEST_BUDGET) KB_E2E_SH=$(KB_E2E_SH) $(GO) test -trimpath -vet=off -count=1 -timeout $(GO_TEST_TIMEOUT) -skip ^TestModel$$ -json ./... | testtimes'; \
	( set -o pipefail; CGO_ENABLED=0 KB_INVARIANT_EXPLORE=report KB_INVARIANT_BUDGET=$(INVARIANT_TEST_BUDGET) KB_E2E_SH='$(KB_E2E_SH)' ZARF=$(TESTBIN)/zarf GORELEASER=$(GORELEASER) COSIGN=$(COSIGN) KREW=$(KREW) hack/lowcpu.sh $(GO) test -trimpath -vet=off -count=1 -timeout $(GO_TEST_TIMEOUT) -skip '^TestModel$$' -json ./... | $(TESTBIN)/testtimes -top 25 ) || rc=$$((rc ? rc : $$?)); \
	hack/lowcpu.sh $(MAKE) --no-print-directory fuzz FUZZTIME=2000x INVARIANT_BUDGET= || rc=$$((rc ? rc : 1)); \
	echo "waiting for e2e-kind-core"; wait $$kind; echo "--- e2e-kind-core ($(KIND_LOG))"; cat $(KIND_LOG); \
	krc=$$(cat $(KIND_LOG).rc 2>/dev/null || echo 1); [ "$$krc" = 0 ] || echo "e2e-kind-core FAILED (exit $$krc)"; \
	[ "$$rc" = 0 ] && [ "$$krc" = 0 ]

## releasetools: goreleaser (pinned in hack/tools/release), cosign (hack/tools/cosign) and krew (hack/tools/krew) into bin/testbin; rebuilt only when a pin changes
GORELEASER := $(TESTBIN)/goreleaser
COSIGN     := $(TESTBIN)/cosign
KREW       := $(TESTBIN)/krew
releasetools: $(GORELEASER) $(COSIGN) $(KREW)
$(GORELEASER): hack/tools/release/go.mod hack/tools/release/go.sum
	@mkdir -p $(TESTBIN)
	@echo "building goreleaser into $(TESTBIN) (cold: several minutes; cached after)"
	$(CACHED) goreleaser-$(call modhash,hack/tools/release)-$(GOVERSION) $(TESTBIN) bash -c 'cd hack/tools/release && CGO_ENABLED=0 $(GO) build -trimpath -o "$$OUT/goreleaser" github.com/goreleaser/goreleaser/v2'
$(COSIGN): hack/tools/cosign/go.mod hack/tools/cosign/go.sum
	@mkdir -p $(TESTBIN)
	@echo "building cosign into $(TESTBIN) (cold: a few minutes; cached after)"
	$(CACHED) cosign-$(call modhash,hack/tools/cosign)-$(GOVERSION) $(TESTBIN) bash -c 'cd hack/tools/cosign && CGO_ENABLED=0 $(GO) build -trimpath -o "$$OUT/cosign" github.com/sigstore/cosign/v3/cmd/cosign'
$(KREW): hack/tools/krew/go.mod hack/tools/krew/go.sum
	@mkdir -p $(TESTBIN)
	$(CACHED) krew-$(call modhash,hack/tools/krew)-$(GOVERSION) $(TESTBIN) bash -c 'cd hack/tools/krew && CGO_ENABLED=0 $(GO) build -trimpath -o "$$OUT/krew" sigs.k8s.io/krew/cmd/krew'

## release-snapshot: every archive (linux and darwin, amd64 and arm64), SBOM, signed checksums and krew manifest into dist/, then check them
## (signed with the test key unless COSIGN_KEY, COSIGN_PUB and COSIGN_PASSWORD name a real one; `make test` runs a two-platform snapshot)
COSIGN_KEY ?= $(CURDIR)/testdata/keys/cosign.key
COSIGN_PUB ?= $(CURDIR)/testdata/keys/cosign.pub
release-snapshot: export COSIGN_KEY := $(COSIGN_KEY)
release-snapshot: export COSIGN_PASSWORD ?= testpass
release-snapshot: releasetools testbin
	PATH="$(TESTBIN):$$PATH" $(GORELEASER) check
	PATH="$(TESTBIN):$$PATH" $(GORELEASER) release --snapshot --clean
	$(GO) run ./hack/release check --key $(COSIGN_PUB) dist

## docs: regenerate docs/cli/*.md and docs/man/*.1 from the commands (a test fails when they are out of date)
docs:
	$(GO) run ./hack/gendocs

## lint: shellcheck every script (Debian's shellcheck, fetched into bin/testbin by hack/tools/shellcheck.sh when missing; the strategy
## scripts as POSIX sh), gofmt, and the plugins built for darwin/arm64
lint:
	@sc=$$(hack/tools/shellcheck.sh) && $$sc scripts/*.sh hack/*.sh hack/tools/*.sh hack/bench/*.sh hack/docker/*.sh hack/images/*.sh hack/flux/*.sh hack/capd/*.sh .ci/run && \
	$$sc -s sh -e SC3043 scripts/*.sh
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	@# The krops site runs macOS on arm64 too: what ships must compile there.
	@# The plugins built with the release build's flags, so that the release
	@# test's darwin/arm64 build finds every package compiled (one cold
	@# compile instead of two); make test then vets every package, tests
	@# included, for darwin (DARWIN_VET): internal/state has darwin-only
	@# files (proc_darwin.go), which go vet on linux never sees.
	@out=$$(mktemp -d) && trap 'rm -rf "$$out"' EXIT && \
	echo "GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) build -trimpath ./cmd/..." && \
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) build -trimpath -o "$$out" ./cmd/...

unit:
	$(GO) test -timeout 30m ./...

## fuzz: run each fuzz target briefly (FUZZTIME, default 10s), then the randomized invariant test
## (e2e TestInvariant) for INVARIANT_BUDGET (default 20m; KB_INVARIANT_SEED=N replays a run)
INVARIANT_BUDGET ?= 20m
fuzz:
	@for t in verify:FuzzParseChecksums verify:FuzzParseZarfYAML verify:FuzzReadArchive verify:FuzzCheckSyftJSON \
	          verify:FuzzParseSplitMetadata verify:FuzzSignatureBundle verify:FuzzDigestPolicy verify:FuzzParseImageRef verify:FuzzParseManifestInfo verify:FuzzSBOMRule journal:FuzzParseTransaction journal:FuzzParseHistory \
	          gate:FuzzParse releasefmt:FuzzParseKrewManifest releasefmt:FuzzParseSHA256Sums fluxart:FuzzRead bluegreen:FuzzFlux; do \
	  pkg=./internal/$${t%%:*}; fn=$${t#*:}; \
	  echo "fuzzing $$pkg $$fn for $(FUZZTIME)"; \
	  $(GO) test $$pkg -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) >/tmp/fuzz-$$fn.log 2>&1 || { cat /tmp/fuzz-$$fn.log; exit 1; }; \
	done
	@if [ -n "$(INVARIANT_BUDGET)" ]; then \
	  echo "TestInvariant for $(INVARIANT_BUDGET)"; \
	  KB_INVARIANT_BUDGET=$(INVARIANT_BUDGET) $(GO) test -count=1 -timeout 0 -run '^TestInvariant$$' -v ./e2e; \
	  echo "TestModel for $(INVARIANT_BUDGET)"; \
	  KB_MODEL_WORKERS=max KB_MODEL_BUDGET=$(INVARIANT_BUDGET) KB_MODEL_OPS=1000000000 $(GO) test -count=1 -timeout 0 -run '^TestModel$$' -v ./internal/model; \
	fi

## install: both spellings of every plugin into PREFIX (default ~/.local/bin), and the strategy scripts into PREFIX/kubectl-bundle-scripts/
install: build
	@mkdir -p $(PREFIX)
	@for p in $(PLUGINS); do \
	  install -m 0755 $(BIN)/kubectl-bundle-$$p $(PREFIX)/kubectl-bundle-$$p; \
	  ln -sf kubectl-bundle-$$p $(PREFIX)/kubectl-bundle_$$p; \
	  ln -sf kubectl-bundle-$$p $(PREFIX)/kubectl_complete-bundle-$$p; \
	  ln -sf kubectl-bundle-$$p $(PREFIX)/kubectl_complete-bundle_$$p; \
	  echo "installed $(PREFIX)/kubectl-bundle-$$p (+ kubectl-bundle_$$p and the kubectl_complete- helpers)"; \
	done
	@# The strategy scripts beside the plugins, where the journal's next
	@# command names them (kubectl-bundle-scripts/, as in the scripts archive).
	@mkdir -p $(PREFIX)/kubectl-bundle-scripts
	@install -m 0755 scripts/*.sh $(PREFIX)/kubectl-bundle-scripts/
	@install -m 0644 scripts/README.md LICENSE $(PREFIX)/kubectl-bundle-scripts/
	@echo "installed $(PREFIX)/kubectl-bundle-scripts/ (blue-green.sh, in-place.sh, recreate.sh, lib.sh)"

uninstall:
	@for p in $(PLUGINS); do rm -f $(PREFIX)/kubectl-bundle-$$p $(PREFIX)/kubectl-bundle_$$p $(PREFIX)/kubectl_complete-bundle-$$p $(PREFIX)/kubectl_complete-bundle_$$p; done
	rm -rf $(PREFIX)/kubectl-bundle-scripts

## bench: the verify benchmark against zarf and openssl (~1 GB package; see docs/benchmarks.md)
bench: build testbin
	ZARF=$(TESTBIN)/zarf hack/bench/verify.sh

## bench-e2e: what a plugin process costs the e2e suite: a few of its scripts with the plugins as binaries of their own
## against copies of the test binary, alternating, CPU time and its ratio (docs/benchmarks.md)
bench-e2e: testbin
	KUBEBUILDER_ASSETS=$(TESTBIN) ZARF=$(TESTBIN)/zarf hack/bench/e2e-plugins.sh

## trusted-root: copy the Sigstore trusted root the pinned zarf embeds into internal/verify/trustedroot/ (verify's default
## root; a test fails when the copy differs from the pinned module's file), with its zarf version, sha256 and date
trusted-root:
	hack/trusted-root.sh

## testdata: regenerate testdata/ packages with the real zarf
testdata: testbin
	ZARF=$(TESTBIN)/zarf hack/gen-testdata.sh

clean:
	rm -rf $(BIN)/kubectl-bundle-* $(BIN)/kubectl-bundle_* dist
