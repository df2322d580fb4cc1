#!/usr/bin/env bash
# Runs the Windows build for real under Wine: a Windows daemon ("win", peerfs.exe under
# Wine) and a Linux daemon ("lin") on loopback. Each initialises, trusts the other and shares
# a folder; then each lists the other's share, pulls a tree with a large file from it and
# sends a tree into it, and every copy is compared byte for byte. Skips (exit 0) with a
# message where Wine cannot be installed. Usage: scripts/wine-test.sh [LINUX_PEERFS_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
LIN_BIN=$(realpath "${1:-bin/peerfs}")
skip() { echo "wine-test: SKIP: $*" >&2; exit 0; }

need=()
command -v wine >/dev/null || need+=(wine64 wine)
command -v x86_64-w64-mingw32-gcc >/dev/null || need+=(gcc-mingw-w64-x86-64-win32)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "wine-test: installing ${need[*]}" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; } ||
      skip "could not install ${need[*]}"
  else
    skip "Wine is not installed (apt-get install wine64 gcc-mingw-w64-x86-64-win32)"
  fi
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/peerfs-wine.XXXXXX")
export WINEPREFIX=$T/prefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wineserver -k 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT

echo "wine-test: building peerfs.exe and the Wine prefix" >&2
GOOS=windows GOARCH=amd64 CGO_ENABLED=0 go build -o "$T/peerfs.exe" ./cmd/peerfs
wineboot --init >/dev/null 2>&1 || skip "wineboot failed: Wine does not run here"
# Go's Windows runtime needs bcryptprimitives.dll (Windows 10), which Wine 8.0 lacks.
sys32=$WINEPREFIX/drive_c/windows/system32
if [ ! -e "$sys32/bcryptprimitives.dll" ]; then
  x86_64-w64-mingw32-gcc -shared -O2 -o "$sys32/bcryptprimitives.dll" scripts/wine/bcryptprimitives.c -ladvapi32
fi

winpath() { echo "Z:${1//\//\\}"; }
WIN=$(winpath "$T/win") LIN=$T/lin
win() { wine "$T/peerfs.exe" --home "$WIN" "$@"; }
lin() { "$LIN_BIN" --home "$LIN" "$@"; }

win init --name win >/dev/null
lin init --name lin >/dev/null
# Started directly, not through win and lin: $! of a backgrounded shell function is a subshell,
# and killing it at cleanup would leave the daemon running.
wine "$T/peerfs.exe" --home "$WIN" daemon --listen 127.0.0.1:0 </dev/null >"$T/win.log" 2>&1 & pids+=($!)
"$LIN_BIN" --home "$LIN" daemon --listen 127.0.0.1:0 </dev/null >"$T/lin.log" 2>&1 & pids+=($!)
listen() {
  for _ in $(seq 300); do
    # Each poll is bounded: under Wine a control call made while the daemon is still starting
    # has been seen to wait for good.
    if out=$(timeout 5 "$@" status --json 2>/dev/null) && addr=$(sed -n 's/.*"listen": *"\([^"]*\)".*/\1/p' <<<"$out") && [ -n "$addr" ]; then
      echo "$addr"; return
    fi
    sleep 0.1
  done
  echo "wine-test: FAIL: daemon did not start" >&2; cat "$T/win.log" "$T/lin.log" >&2; exit 1
}
WIN_ADDR=$(listen wine "$T/peerfs.exe" --home "$WIN") LIN_ADDR=$(listen "$LIN_BIN" --home "$LIN")
WIN_ID=$(win id | tr -d '\r') LIN_ID=$(lin id)
win peer add "$LIN_ID" --name lin --addr "$LIN_ADDR" >/dev/null
lin peer add "$WIN_ID" --name win --addr "$WIN_ADDR" >/dev/null

# A tree on each side: a large file, small files in folders, an empty file.
maketree() {
  mkdir -p "$1/docs/deep/er" "$1/empty-dir"
  head -c $((96 << 20)) /dev/urandom >"$1/large.bin"
  for i in $(seq 1 40); do head -c $((RANDOM * 3)) /dev/urandom >"$1/docs/f$i.txt"; done
  echo "$2" >"$1/docs/deep/er/marker.txt"
  : >"$1/docs/empty.txt"
}
maketree "$T/win-share" "made on Windows"
maketree "$T/lin-share" "made on Linux"
mkdir -p "$T/win-inbox" "$T/lin-inbox"
win share add files "$(winpath "$T/win-share")" --peer lin >/dev/null
win share add inbox "$(winpath "$T/win-inbox")" --peer lin >/dev/null
lin share add files "$T/lin-share" --peer win >/dev/null
lin share add inbox "$T/lin-inbox" --peer win >/dev/null

same() {
  if ! diff -r "$1" "$2" >&2; then
    echo "wine-test: FAIL: $3: $1 and $2 differ" >&2; exit 1
  fi
  echo "wine-test: ok: $3" >&2
}
lin ls win:files | grep -q large.bin || { echo "wine-test: FAIL: Linux cannot list the Windows share" >&2; exit 1; }
echo "wine-test: ok: Linux lists the Windows share" >&2
win ls lin:files | grep -q large.bin || { echo "wine-test: FAIL: Windows cannot list the Linux share" >&2; exit 1; }
echo "wine-test: ok: Windows lists the Linux share" >&2

mkdir "$T/lin-pulled" "$T/win-pulled"
lin pull win:files "$T/lin-pulled" >/dev/null
same "$T/win-share" "$T/lin-pulled/files" "Linux pulls a tree from Windows"
win pull lin:files "$(winpath "$T/win-pulled")" >/dev/null
same "$T/lin-share" "$T/win-pulled/files" "Windows pulls a tree from Linux"
lin send "$T/lin-share" win:inbox >/dev/null
same "$T/lin-share" "$T/win-inbox/lin-share" "Linux sends a tree to Windows"
win send "$(winpath "$T/win-share")" lin:inbox >/dev/null
same "$T/win-share" "$T/lin-inbox/win-share" "Windows sends a tree to Linux"
echo "wine-test: the Windows build (under Wine) and the Linux build exchanged trees both ways" >&2

fail() { echo "wine-test: FAIL: $*" >&2; exit 1; }
# eventually CMD...: CMD succeeds within 10 seconds.
eventually() {
  for _ in $(seq 100); do "$@" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

# The owner side's Windows code, unit-tested under Wine: change events through fsnotify
# (ReadDirectoryChangesW), inode numbers, and removals and renames by directory handle.
for pkg in watch share; do
  GOOS=windows GOARCH=amd64 CGO_ENABLED=0 go test -c -o "$T/$pkg.test.exe" "./internal/$pkg"
done
wine "$T/watch.test.exe" -test.run 'TestFileIndex|TestWindowsEvents|TestBatch' >&2 ||
  fail "the watch tests failed under Wine"
wine "$T/share.test.exe" -test.run 'TestRemoveRenameByHandle|TestRmdirOfWatchedDirectory|TestCaseCollision|TestFoldTwin' >&2 ||
  fail "the share tests failed under Wine"
echo "wine-test: ok: the owner side's Windows tests pass under Wine" >&2

# Names Windows cannot hold: a send refuses them on the Windows owner, a Windows pull refuses
# them file by file and pulls the rest.
mkdir -p "$T/odd/dir" "$T/odd-pulled"
echo fine >"$T/odd/dir/fine.txt"
echo a >"$T/odd/dir/README"
echo b >"$T/odd/dir/Readme"
echo c >"$T/odd/dir/NUL.txt"
echo d >"$T/odd/dir/what?"
lin share add odd "$T/odd" --peer win >/dev/null
if out=$(win pull lin:odd "$(winpath "$T/odd-pulled")" 2>&1 >/dev/null); then
  fail "Windows pulled names it cannot hold"
fi
for want in 'dir/NUL.txt' 'device name' 'what?' 'differs only in case'; do
  grep -qF "$want" <<<"$out" || fail "the refused pull does not say $want: $out"
done
[ "$(cat "$T/odd-pulled/odd/dir/fine.txt")" = fine ] || fail "a refused name stopped the rest of the pull"
[ ! -e "$T/odd-pulled/odd/dir/NUL.txt" ] || fail "NUL.txt was written"
echo "wine-test: ok: Windows refuses names it cannot hold in a pull, file by file" >&2
mkdir -p "$T/odd-send"
echo x >"$T/odd-send/CON.txt"
if out=$(lin send "$T/odd-send" win:inbox 2>&1 >/dev/null); then
  fail "the Windows owner accepted CON.txt"
fi
grep -qF 'device name' <<<"$out" || fail "the refused send does not say why: $out"
echo "wine-test: ok: the Windows owner refuses a device name in a send" >&2

# A Linux mount of a Windows share: the owner's change events (ReadDirectoryChangesW through
# fsnotify), and the mount's creations, renames and removals, which the owner makes by
# directory handle.
if [ ! -e /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
  echo "wine-test: SKIP: the mount of a Windows share: no /dev/fuse or fusermount3" >&2
  exit 0
fi
M=$T/mnt
mkdir "$M"
lin mount win:inbox "$M" >/dev/null
trap 'fusermount3 -u "$M" 2>/dev/null || true; cleanup' EXIT
lin mounts --json | grep -q '"events": *true' || fail "the Windows owner sends the mount no change events"
ls "$M" >/dev/null
echo "made by the owner" >"$T/win-inbox/owner.txt"
eventually test -e "$M/owner.txt" || fail "a file the Windows owner made did not appear in the mount"
echo "wine-test: ok: the Windows owner's change reached the Linux mount" >&2
mkdir "$M/d"
echo one >"$M/d/f"
echo two >"$M/d/g"
mv "$M/d/g" "$M/d/f"
mv "$M/d" "$M/e"
mkdir "$M/empty" "$M/full"
: >"$M/full/x"
mv -T "$M/empty" "$M/full" 2>/dev/null && fail "a directory replaced a directory with entries"
[ "$(cat "$T/win-inbox/e/f")" = two ] && [ ! -e "$T/win-inbox/e/g" ] && [ ! -e "$T/win-inbox/d" ] ||
  fail "renames through the mount did not reach the Windows owner's disk"
rm "$M/e/f"
[ ! -e "$T/win-inbox/e/f" ] || fail "removing a file through the mount did not reach the Windows owner's disk"
rmdir "$M/e" "$M/empty" || fail "rmdir through the mount failed"
rm -r "$M/full" || fail "rm -r through the mount failed"
for gone in e empty full; do
  [ ! -e "$M/$gone" ] && [ ! -e "$T/win-inbox/$gone" ] ||
    fail "removing $gone through the mount did not reach the Windows owner's disk"
done
touch "$M/AUX.txt" 2>/dev/null && fail "the Windows owner created AUX.txt"
echo "wine-test: ok: the Linux mount creates, renames and removes on the Windows owner" >&2
lin unmount "$M" >/dev/null
