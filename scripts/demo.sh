#!/usr/bin/env bash
# Local demo: two peerfs nodes ("alpha" and "beta") on loopback in a temporary directory.
# alpha shares a generated folder with beta; beta lists it and pulls it, and the throughput
# is printed; then beta mounts another share of alpha's as a local folder, reads through it
# and writes a file back. The daemons and the mount keep running afterwards so you can keep
# playing; the script prints how, and how to unmount and stop them.
set -euo pipefail
BIN=$(realpath "${1:-bin/peerfs}")
DEMO=$(mktemp -d "${TMPDIR:-/tmp}/peerfs-demo.XXXXXX")
A=$DEMO/alpha B=$DEMO/beta
say() { printf '\n\033[1m%s\033[0m\n' "$*" >&2; }
[ -n "${NO_COLOR:-}" ] && say() { printf '\n%s\n' "$*" >&2; }
run() { printf '$ %s\n' "$*" >&2; "$@"; }

say "1. Two devices, each with its own identity (Ed25519 key, device ID) under $DEMO"
run "$BIN" --home "$A" init --name alpha
run "$BIN" --home "$B" init --name beta

say "2. Start both daemons on loopback"
"$BIN" --home "$A" daemon --listen 127.0.0.1:0 </dev/null >"$DEMO/alpha.log" 2>&1 & echo $! >"$DEMO/pids"
"$BIN" --home "$B" daemon --listen 127.0.0.1:0 </dev/null >"$DEMO/beta.log" 2>&1 & echo $! >>"$DEMO/pids"
listen() {
  for _ in $(seq 100); do
    if out=$("$BIN" --home "$1" status --json 2>/dev/null); then
      sed -n 's/.*"listen": *"\([^"]*\)".*/\1/p' <<<"$out" && return
    fi
    sleep 0.1
  done
  echo "daemon for $1 did not start; see $1.log" >&2; exit 1
}
ADDR_A=$(listen "$A"); listen "$B" >/dev/null
echo "alpha listens on $ADDR_A" >&2

say "3. Trust each other by device ID (no trust on first use)"
ID_A=$("$BIN" --home "$A" id) ID_B=$("$BIN" --home "$B" id)
run "$BIN" --home "$A" peer add "$ID_B" --name beta
run "$BIN" --home "$B" peer add "$ID_A" --name alpha --addr "$ADDR_A"

say "4. alpha shares a generated folder with beta, read-only"
SRC=$DEMO/alpha-files
mkdir -p "$SRC/src/lib" "$SRC/docs"
head -c $((512 << 20)) /dev/urandom >"$SRC/big.bin"
for i in $(seq 1 300); do head -c $((RANDOM % 8192)) /dev/urandom >"$SRC/src/lib/file$i.c"; done
echo "hello from alpha" >"$SRC/docs/README.txt"
ln -s docs/README.txt "$SRC/readme-link"
run "$BIN" --home "$A" share add demo "$SRC" --read-only --peer beta

say "5. beta sees alpha: TLS 1.3, post-quantum key exchange, round-trip time"
for _ in $(seq 100); do "$BIN" --home "$B" status --json | grep -q '"connected": *true' && break; sleep 0.1; done
run "$BIN" --home "$B" status

say "6. beta lists alpha's shares and the demo folder"
run "$BIN" --home "$B" ls alpha:
run "$BIN" --home "$B" ls alpha:demo

say "7. beta pulls the whole folder (512 MiB file + 300 small files), verified by BLAKE3"
mkdir "$DEMO/beta-files"
run "$BIN" --home "$B" pull alpha:demo "$DEMO/beta-files"
diff -r "$SRC" "$DEMO/beta-files/demo"
echo "identical: diff -r finds no difference" >&2

say "8. The headline: beta mounts a read-write share of alpha as a local folder"
DESK=$DEMO/alpha-desk MNT=$DEMO/beta-mount
mkdir -p "$DESK/notes" "$MNT"
printf 'Plans for Thursday\n- ship it\n' >"$DESK/notes/plans.md"
head -c $((4 << 20)) /dev/urandom >"$DESK/photo.raw"
run "$BIN" --home "$A" share add desk "$DESK" --peer beta
MOUNTED=
if [ ! -e /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
  echo "skipped: mounting needs /dev/fuse and fusermount3 (make deps installs fuse3)" >&2
elif run "$BIN" --home "$B" mount alpha:desk "$MNT"; then
  MOUNTED=1
  run ls -l "$MNT" "$MNT/notes"
  run cat "$MNT/notes/plans.md"
  echo "written on beta, through the mount" >"$MNT/notes/from-beta.txt"
  printf '$ echo "written on beta, through the mount" >%s\n' "$MNT/notes/from-beta.txt" >&2
  run cat "$DESK/notes/from-beta.txt"
  echo "the file is on alpha's disk: $DESK/notes/from-beta.txt" >&2
fi

say "The two daemons keep running. Keep playing:"
cat >&2 <<EOT
  export PEERFS_HOME=$B          # act as beta
  $BIN status
  $BIN ls alpha:demo/src/lib
  $BIN pull alpha:demo/docs/README.txt /tmp/
  $BIN --home $A share add inbox $DEMO/inbox --peer beta   # (mkdir $DEMO/inbox first)
  $BIN send /etc/hostname alpha:inbox
EOT
if [ -n "$MOUNTED" ]; then
  cat >&2 <<EOT
  ls -l $MNT; echo hi >$MNT/notes/hi.txt; cat $DESK/notes/hi.txt
  $BIN stats $MNT                 # FUSE calls, cache hits, round trips
Unmount: $BIN --home $B unmount $MNT     # (or: fusermount3 -u $MNT)
EOT
fi
cat >&2 <<EOT
Logs: $DEMO/alpha.log $DEMO/beta.log
Stop: ${MOUNTED:+$BIN --home $B unmount $MNT; }kill \$(cat $DEMO/pids); rm -rf $DEMO
EOT
