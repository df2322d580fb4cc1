# peerfs build, demo, tests and benchmarks. Everything a fresh machine needs is installed by
# the targets themselves (Go modules from the module proxy; apt packages by scripts/deps.sh).

GO       ?= go
BIN      := bin/peerfs
BENCHBIN := bin/peerfs-bench
# Fuzzing runs a count of inputs, about 30 s each here: a duration (-fuzztime=30s) races the
# end of fuzzing in Go's fuzz coordinator before go1.27 and fails with "context deadline
# exceeded" and no crasher now and then (go.dev/issue/75804).
FUZZ_FRAME_EXECS  ?= 800000x
FUZZ_PATH_EXECS   ?= 200000x
FUZZ_SERVER_EXECS ?= 150000x
FUZZ_PUNCH_EXECS  ?= 200000x
FUZZ_WAL_EXECS    ?= 100000x

# What "peerfs version" prints, set at link time (override: make build VERSION=v1.2.3).
VERSION    := $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT     := $(shell git rev-parse HEAD 2>/dev/null)
BUILD_DATE := $(shell date -u $(if $(SOURCE_DATE_EPOCH),-d @$(SOURCE_DATE_EPOCH)) +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS    := -X github.com/peerfs/peerfs/internal/cli.version=$(VERSION) \
              -X github.com/peerfs/peerfs/internal/cli.commit=$(COMMIT) \
              -X github.com/peerfs/peerfs/internal/cli.buildDate=$(BUILD_DATE)

.PHONY: all build dist demo test test-race test-full fuzz crosscheck bench bench-quick bench-report deps clean

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/peerfs
	$(GO) build -o $(BENCHBIN) ./cmd/peerfs-bench

# Release artefacts in dist/: an archive per platform (linux, darwin and freebsd .tar.gz,
# windows .zip) with the binary, README, systemd unit, completions and man pages; a .deb for
# linux/amd64 and linux/arm64 (built with nfpm, fetched by the script); SHA256SUMS.
dist:
	PEERFS_VERSION='$(VERSION)' PEERFS_COMMIT='$(COMMIT)' PEERFS_BUILD_DATE='$(BUILD_DATE)' scripts/dist.sh -o dist

# Two peers on loopback in a temporary directory: trust, share, list, pull, throughput, then a
# mount of the other's share: ls -l, a read, a write back.
demo: deps build
	scripts/demo.sh $(BIN)

deps:
	scripts/deps.sh

# The whole suite: vet, the race detector on short sizes (one package at a time: the mount
# and watch tests are timing-sensitive under load), the full-size two-node tests
# (1 GiB pull, 10,000-file tree, interrupted pulls), and bounded fuzzing of the frame decoder,
# of share path resolution, of the request server (frames over a session to a real share) and
# of the punch messages;
# first, the build and vet of every platform peerfs ships for, and the Windows build run under
# Wine against the Linux one (scripts/wine-test.sh).
test: deps build
	$(GO) vet ./...
	scripts/crosscheck.sh
	scripts/wine-test.sh $(BIN)
	$(GO) test -race -short -count=1 -p 1 ./...
	$(GO) test -race -short -count=1 -tags fsnotifytest ./internal/watch/
	$(GO) test -count=1 -timeout 20m ./internal/node/
	$(GO) test -count=1 -timeout 20m ./cmd/...
	$(MAKE) fuzz

# Build and vet for linux/amd64, linux/arm64, darwin/amd64, darwin/arm64, windows/amd64 and
# freebsd/amd64.
crosscheck:
	scripts/crosscheck.sh

fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzFrame -fuzztime=$(FUZZ_FRAME_EXECS) ./internal/wire/
	$(GO) test -run='^$$' -fuzz=FuzzSharePath -fuzztime=$(FUZZ_PATH_EXECS) ./internal/share/
	$(GO) test -run='^$$' -fuzz=FuzzServer -fuzztime=$(FUZZ_SERVER_EXECS) ./internal/serve/
	$(GO) test -run='^$$' -fuzz=FuzzMessage -fuzztime=$(FUZZ_PUNCH_EXECS) ./internal/punch/
	$(GO) test -run='^$$' -fuzz=FuzzReplay -fuzztime=$(FUZZ_WAL_EXECS) ./internal/wal/

# The benchmark suites of peerfs-bench (BENCHMARKS.md says what each measures), in the order
# BENCHMARKS.md shows them.
BENCH_SUITES   := link mount blocksize patterns meta tree tune wan reach pair
BENCH_RESULTS  := bench-results
# The WAN suite at its own defaults (find + grep over 10,000 files, 1,000-file clone and
# creates, 0, 10 and 50 ms) takes about 3 hours for 3 runs, most of it sshfs at 50 ms. make
# bench uses these smaller sizes (about 20 minutes); "make bench-wan BENCH_WAN_ARGS=" runs the
# suite's defaults.
BENCH_WAN_ARGS ?= --rtt 10,50 --tree-files 1000 --files 100 --creates 100 --wan-size 128MiB

# Every suite at full size, one after the other (they share the machine's cores), each
# writing $(BENCH_RESULTS)/SUITE.json; then "peerfs-bench report" regenerates the results part
# of BENCHMARKS.md and the plots in docs/bench/. Takes about an hour (BENCHMARKS.md gives each suite's
# duration). scripts/bench-deps.sh installs sshfs and openssh-server when run as root; without
# them the sshfs comparisons are skipped with a note.
bench: build
	scripts/bench-deps.sh
	BENCHBIN=$(BENCHBIN) PEERFS_BIN=$(BIN) WAN_ARGS="$(BENCH_WAN_ARGS)" scripts/bench.sh --results $(BENCH_RESULTS) $(BENCH_SUITES)

# The same with --quick (tiny sizes, one run) into a temporary directory, reported into a copy
# of BENCHMARKS.md there: a check of the harness, never a result.
bench-quick: build
	scripts/bench-deps.sh
	BENCHBIN=$(BENCHBIN) PEERFS_BIN=$(BIN) WAN_ARGS="$(BENCH_WAN_ARGS)" scripts/bench.sh --quick $(BENCH_SUITES)

# One suite at full size into $(BENCH_RESULTS) (make bench-wan, make bench-link...), without
# touching BENCHMARKS.md; "make bench-report" then regenerates it from every result there.
bench-%: build
	scripts/bench-deps.sh
	BENCHBIN=$(BENCHBIN) PEERFS_BIN=$(BIN) WAN_ARGS="$(BENCH_WAN_ARGS)" scripts/bench.sh --results $(BENCH_RESULTS) --no-report $*

bench-report: build
	$(BENCHBIN) report --results $(BENCH_RESULTS) --markdown BENCHMARKS.md --plots docs/bench

clean:
	rm -rf bin dist $(BENCH_RESULTS) bench-link.json bench-mount.json
