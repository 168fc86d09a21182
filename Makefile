# kubectl-bundle. `make demo` and `make test` are the two commands a fresh machine needs.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c

GO        ?= go
PREFIX    ?= $(HOME)/.local/bin
BIN       := $(CURDIR)/bin
TESTBIN   := $(BIN)/testbin
PLUGINS   := verify journal
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS   := -s -w -X github.com/kubectl-bundle/kubectl-bundle/internal/cli.Version=$(VERSION)
# The real zarf the tests and the benchmark run: pinned in hack/tools/go.mod.
ZARF_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/zarf-dev/zarf") {print $$(i+1); exit}}' hack/tools/go.mod)
ZARF_STAMP   := $(TESTBIN)/.zarf-$(ZARF_VERSION)-$(shell cat hack/tools/go.mod hack/tools/go.sum | sha256sum | cut -c1-12)
FUZZTIME  ?= 10s

.PHONY: all build demo test unit testbin install uninstall fuzz bench testdata vet lint clean

all: build

## build: the plugins into bin/, with both kubectl spellings of each name
build:
	@mkdir -p $(BIN)
	@for p in $(PLUGINS); do \
	  CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-bundle-$$p ./cmd/kubectl-bundle-$$p; \
	  ln -sf kubectl-bundle-$$p $(BIN)/kubectl-bundle_$$p; \
	done

## demo: build, then verify the example package in testdata/ with its key
demo: build
	$(BIN)/kubectl-bundle-verify testdata/packages/zarf-package-demo-amd64-1.0.0.tar.zst --key testdata/keys/cosign.pub

## testbin: the real zarf, built from the pinned tools module; rebuilt only when the pin changes
testbin: $(ZARF_STAMP)
$(ZARF_STAMP): hack/tools/go.mod hack/tools/go.sum
	@mkdir -p $(TESTBIN)
	@echo "building zarf $(ZARF_VERSION) into $(TESTBIN) (cold: several minutes; cached after)"
	cd hack/tools && CGO_ENABLED=0 $(GO) build -trimpath \
	  -ldflags "-s -w -X github.com/zarf-dev/zarf/src/config.CLIVersion=$(ZARF_VERSION)" \
	  -o $(TESTBIN)/zarf github.com/zarf-dev/zarf
	@test "$$($(TESTBIN)/zarf version)" = "$(ZARF_VERSION)" || { echo "built zarf does not report $(ZARF_VERSION)" >&2; exit 1; }
	@rm -f $(TESTBIN)/.zarf-*
	@touch $@

## test: everything: vet, unit and testscript suites against the real zarf and kubectl, fuzz seeds, short fuzzing
test: testbin
	$(GO) vet ./...
	ZARF=$(TESTBIN)/zarf $(GO) test -count=1 ./...
	$(MAKE) fuzz FUZZTIME=5s

unit:
	$(GO) test ./...

## fuzz: run each fuzz target briefly (FUZZTIME, default 10s)
fuzz:
	@for t in verify:FuzzParseChecksums verify:FuzzParseZarfYAML verify:FuzzReadArchive verify:FuzzCheckSyftJSON \
	          verify:FuzzParseSplitMetadata verify:FuzzSignatureBundle journal:FuzzParseTransaction journal:FuzzParseHistory; do \
	  pkg=./internal/$${t%%:*}; fn=$${t#*:}; \
	  echo "fuzzing $$pkg $$fn for $(FUZZTIME)"; \
	  $(GO) test $$pkg -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) >/tmp/fuzz-$$fn.log 2>&1 || { cat /tmp/fuzz-$$fn.log; exit 1; }; \
	done

## install: both spellings of every plugin into PREFIX (default ~/.local/bin)
install: build
	@mkdir -p $(PREFIX)
	@for p in $(PLUGINS); do \
	  install -m 0755 $(BIN)/kubectl-bundle-$$p $(PREFIX)/kubectl-bundle-$$p; \
	  ln -sf kubectl-bundle-$$p $(PREFIX)/kubectl-bundle_$$p; \
	  echo "installed $(PREFIX)/kubectl-bundle-$$p (+ kubectl-bundle_$$p)"; \
	done

uninstall:
	@for p in $(PLUGINS); do rm -f $(PREFIX)/kubectl-bundle-$$p $(PREFIX)/kubectl-bundle_$$p; done

## bench: the verify benchmark against zarf and openssl (~1 GB package; see docs/benchmarks.md)
bench: build testbin
	ZARF=$(TESTBIN)/zarf hack/bench/verify.sh

## testdata: regenerate testdata/ packages with the real zarf
testdata: testbin
	ZARF=$(TESTBIN)/zarf hack/gen-testdata.sh

clean:
	rm -rf $(BIN)/kubectl-bundle-* $(BIN)/kubectl-bundle_* dist
