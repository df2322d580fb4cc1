#!/usr/bin/env bash
# Times `peerfs pull` of a tree of small files and of one large file with two builds of peerfs,
# interleaved run by run: what syncing pulled files and directories costs (BENCHMARKS.md,
# "Durable pulls"). Usage: scripts/bench-pull-sync.sh OLD_BIN NEW_BIN [RUNS] [FILES] [DIR]
set -euo pipefail
old=$(realpath "$1") new=$(realpath "$2") runs=${3:-5} files=${4:-10000} dir=${5:-$(mktemp -d)}
src=$dir/src
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

if [ ! -d "$src/tree" ]; then
	echo "making $files files of 1-8 KiB in 100 directories and a 1 GiB file under $src" >&2
	mkdir -p "$src/tree"
	for d in $(seq 0 99); do mkdir -p "$src/tree/d$d"; done
	head -c $((8 << 20)) /dev/urandom >"$dir/pool"
	for i in $(seq 0 $((files - 1))); do
		dd if="$dir/pool" of="$src/tree/d$((i % 100))/f$i" bs=1 count=$(( (i * 7919 % 7168) + 1024 )) skip=$(( i * 4099 % (7 << 20) )) status=none iflag=skip_bytes,count_bytes
	done
	head -c $((1 << 30)) /dev/urandom >"$src/big.bin"
fi

# start NAME BIN: homes $dir/NAME-alpha and $dir/NAME-beta, alpha shares $src as "bench".
start() {
	local name=$1 bin=$2 a=$dir/$1-alpha b=$dir/$1-beta
	rm -rf "$a" "$b"
	"$bin" --home "$a" init --name alpha >/dev/null
	"$bin" --home "$b" init --name beta >/dev/null
	"$bin" --home "$a" daemon --listen 127.0.0.1:0 2>>"$a.log" & pids+=($!)
	"$bin" --home "$b" daemon --listen 127.0.0.1:0 2>>"$b.log" & pids+=($!)
	local addr=""
	for _ in $(seq 100); do
		addr=$("$bin" --home "$a" status --json 2>/dev/null | sed -n 's/.*"listen": *"\([^"]*\)".*/\1/p') || true
		"$bin" --home "$b" status --json >/dev/null 2>&1 && [ -n "$addr" ] && break
		sleep 0.1
	done
	"$bin" --home "$a" peer add "$("$bin" --home "$b" id)" --name beta >/dev/null
	"$bin" --home "$b" peer add "$("$bin" --home "$a" id)" --name alpha --addr "$addr" >/dev/null
	"$bin" --home "$a" share add bench "$src" --peer beta >/dev/null
}

# pull NAME BIN WHAT: seconds for one pull of alpha:bench/WHAT into a fresh folder.
pull() {
	local dest=$dir/dest
	rm -rf "$dest"; mkdir -p "$dest"; sync
	local t0=$(date +%s.%N)
	"$2" --home "$dir/$1-beta" pull "alpha:bench/$3" "$dest" --quiet
	local t1=$(date +%s.%N)
	rm -rf "$dest"
	echo "$t1 - $t0" | bc
}

start old "$old"
start new "$new"
# Warm the owner's page cache, untimed; the first tries wait for the links to come up.
for v in old new; do
	bin=$old; [ $v = new ] && bin=$new
	for _ in $(seq 50); do pull $v "$bin" big.bin >/dev/null 2>&1 && break; sleep 0.2; done
	pull $v "$bin" tree >/dev/null
done
for r in $(seq "$runs"); do
	for v in old new; do
		bin=$old; [ $v = new ] && bin=$new
		echo "$v tree $(pull $v "$bin" tree)"
		echo "$v big $(pull $v "$bin" big.bin)"
	done
done
