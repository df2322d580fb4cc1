#!/usr/bin/env bash
# Installs what the build and the tests need on a fresh Debian machine. Go must already be on
# PATH; Go modules come from the module proxy during the build. The mount needs fuse3
# (fusermount3); the mount's workload tests use git, rsync, sqlite3, stress-ng, make and gcc;
# the network lab (internal/netlab) uses iproute2, nftables, conntrack and tcpdump.
set -euo pipefail
command -v go >/dev/null || { echo "deps: Go is not installed: install Go 1.26 or newer" >&2; exit 1; }
need=()
command -v fusermount3 >/dev/null || need+=(fuse3)
command -v git >/dev/null || need+=(git)
command -v rsync >/dev/null || need+=(rsync)
command -v sqlite3 >/dev/null || need+=(sqlite3)
command -v stress-ng >/dev/null || need+=(stress-ng)
command -v make >/dev/null || need+=(make)
command -v gcc >/dev/null || need+=(gcc)
command -v ip >/dev/null || need+=(iproute2)
command -v nft >/dev/null || need+=(nftables)
command -v conntrack >/dev/null || need+=(conntrack)
command -v tcpdump >/dev/null || need+=(tcpdump)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "deps: installing ${need[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "deps: please install: ${need[*]} (tests that need them are skipped)" >&2
  fi
fi
go mod download
