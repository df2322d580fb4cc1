# peerfs build, demo, tests and benchmarks. Everything a fresh machine needs is installed by
# the targets themselves (Go modules from the module proxy; apt packages by scripts/deps.sh).

GO       ?= go
BIN      := bin/peerfs
BENCHBIN := bin/peerfs-bench
FUZZTIME ?= 30s

.PHONY: all build demo test test-race test-full fuzz bench bench-link bench-mount deps clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/peerfs
	$(GO) build -o $(BENCHBIN) ./cmd/peerfs-bench

# Two peers on loopback in a temporary directory: trust, share, list, pull, throughput.
demo: build
	scripts/demo.sh $(BIN)

deps:
	scripts/deps.sh

# The whole suite: vet, the race detector on short sizes (one package at a time: the mount
# and watch tests are timing-sensitive under load), the full-size two-node tests
# (1 GiB pull, 10,000-file tree, interrupted pulls), and bounded fuzzing of the frame decoder
# and of share path resolution.
test: deps build
	$(GO) vet ./...
	$(GO) test -race -short -count=1 -p 1 ./...
	$(GO) test -count=1 -timeout 20m ./internal/node/
	$(GO) test -count=1 -timeout 10m ./cmd/...
	$(MAKE) fuzz

fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzFrame -fuzztime=$(FUZZTIME) ./internal/wire/
	$(GO) test -run='^$$' -fuzz=FuzzSharePath -fuzztime=$(FUZZTIME) ./internal/share/

# Link throughput: plain TCP, bare TLS, peerfs transport, native cp and a real peerfs pull,
# 1 GiB each, 5 runs, medians (BENCHMARKS.md).
bench-link: build
	$(BENCHBIN) link --size 1GiB --runs 5 --peerfs $(BIN) --out bench-link.json

# The mount against sshfs and the owner's disk: cold and warm 1 GiB reads, a 1 GiB cp, git
# clone of a 1,000-file repository, 1,000 creates of 4 KiB; 3 runs, medians (BENCHMARKS.md).
# scripts/bench-deps.sh installs sshfs and openssh-server when run as root; without them the
# sshfs column is skipped.
bench-mount: build
	scripts/bench-deps.sh
	$(BENCHBIN) mount --size 1GiB --runs 3 --peerfs $(BIN) --out bench-mount.json

# Both benchmarks, one after the other (they share the two cores).
bench:
	$(MAKE) bench-link
	$(MAKE) bench-mount

clean:
	rm -rf bin bench-link.json bench-mount.json
