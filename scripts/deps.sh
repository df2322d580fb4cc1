#!/usr/bin/env bash
# Installs what the build and the tests need on a fresh Debian machine. Go must already be on
# PATH; Go modules come from the module proxy during the build.
set -euo pipefail
command -v go >/dev/null || { echo "deps: Go is not installed: install Go 1.26 or newer" >&2; exit 1; }
need=()
command -v mount >/dev/null || need+=(mount)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
  else
    echo "deps: please install: ${need[*]}" >&2
  fi
fi
go mod download
