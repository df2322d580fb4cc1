#!/usr/bin/env bash
# Cross-compiles and vets peerfs for every platform it ships for, so that code written on
# Linux stays portable. The mount (internal/fusefs, go-fuse) has no Windows build: there the
# node answers mount requests with an error that suggests pull and send. peerfs-bench drives
# Linux mounts and tools and is built for Linux only.
set -euo pipefail
cd "$(dirname "$0")/.."
platforms=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 freebsd/amd64)
failed=()
for p in "${platforms[@]}"; do
  os=${p%/*} arch=${p#*/}
  pkgs=$(GOOS=$os GOARCH=$arch go list ./cmd/peerfs ./internal/...)
  if [ "$os" = windows ]; then
    pkgs=$(grep -v '/internal/fusefs$' <<<"$pkgs")
  fi
  echo "crosscheck: $os/$arch" >&2
  # shellcheck disable=SC2086 # one package path per word
  if ! GOOS=$os GOARCH=$arch CGO_ENABLED=0 go build -o /dev/null ./cmd/peerfs ||
     ! GOOS=$os GOARCH=$arch CGO_ENABLED=0 go vet $pkgs; then
    failed+=("$p")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "crosscheck: failed for ${failed[*]}: keep platform code in files named for the platform, with a portable fallback" >&2
  exit 1
fi
echo "crosscheck: ${platforms[*]} build and vet clean" >&2
