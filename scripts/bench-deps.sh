#!/usr/bin/env bash
# Installs what "peerfs-bench mount" compares against: sshfs (the FUSE client) and
# openssh-server (sshd, which the benchmark starts itself on 127.0.0.1 with a config, host key
# and authorized key of its own in its work directory; the system's sshd is never started or
# configured). Installs only as root with apt-get; otherwise it says what is missing and the
# benchmark skips its sshfs column.
set -euo pipefail
need=()
command -v fusermount3 >/dev/null || need+=(fuse3)
command -v git >/dev/null || need+=(git)
command -v sshfs >/dev/null || need+=(sshfs)
[ -x /usr/sbin/sshd ] || command -v sshd >/dev/null || need+=(openssh-server)
command -v ssh-keygen >/dev/null || need+=(openssh-client)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "bench-deps: installing ${need[*]}" >&2
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; }; then
    echo "bench-deps: apt-get failed; the sshfs column will be skipped" >&2
  fi
else
  echo "bench-deps: please install: ${need[*]} (apt-get install ${need[*]}); the sshfs column is skipped without them" >&2
fi
