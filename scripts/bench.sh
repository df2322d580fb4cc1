#!/usr/bin/env bash
# Runs peerfs-bench suites one after the other (never two at once: they share the machine's
# cores) and then "peerfs-bench report".
#
#   scripts/bench.sh [--quick] [--results DIR] [--no-report] SUITE...
#
# Full size (default): each suite writes DIR/SUITE.json (DIR: bench-results), then report
# regenerates the results part of BENCHMARKS.md and the plots in docs/bench/.
# --quick: tiny sizes and one run, into a new temporary directory, and the report goes to a
# copy of BENCHMARKS.md there: the real one is never touched.
# --no-report: run the suites only (make bench-SUITE); "make bench-report" regenerates later.
#
# A suite the binary does not know (its usage lists the verbs) is skipped with a line saying
# so. ^C stops the suite under way (it unmounts and stops what it started) and the script.
set -euo pipefail

BENCH=${BENCHBIN:-bin/peerfs-bench}
PEERFS=${PEERFS_BIN:-bin/peerfs}
quick=
results=
report=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --results) results=$2; shift ;;
    --no-report) report= ;;
    --) shift; break ;;
    -*) echo "bench.sh: unknown flag $1" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
[ $# -gt 0 ] || { echo "usage: scripts/bench.sh [--quick] [--results DIR] [--no-report] SUITE..." >&2; exit 2; }

markdown=BENCHMARKS.md
plots=docs/bench
if [ -n "$quick" ]; then
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/peerfs-bench-quick.XXXXXX")
  results=${results:-$tmp/results}
  cp BENCHMARKS.md "$tmp/BENCHMARKS.md"
  markdown=$tmp/BENCHMARKS.md
  plots=$tmp/docs/bench
fi
results=${results:-bench-results}
mkdir -p "$results"

verbs=$("$BENCH" 2>&1 || true) # with no arguments it prints the usage, one verb a line
for suite in "$@"; do
  if ! grep -q "peerfs-bench $suite " <<<"$verbs"; then
    echo "bench.sh: $BENCH has no suite \"$suite\"; skipped" >&2
    continue
  fi
  args=()
  if [ -n "$quick" ]; then
    args+=(--quick)
  else
    case "$suite" in
      link|reach) args+=(--runs 5) ;; # the fastest suites; their rows swing the most between runs
      wan) read -ra extra <<<"${WAN_ARGS:-}"; args+=("${extra[@]}") ;; # see BENCH_WAN_ARGS in the Makefile
    esac
  fi
  echo "== peerfs-bench $suite ${args[*]} --out $results/$suite.json" >&2
  start=$SECONDS
  "$BENCH" "$suite" --peerfs "$PEERFS" --out "$results/$suite.json" "${args[@]}"
  echo "== $suite took $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s" >&2
done

if [ -n "$report" ]; then
  "$BENCH" report --results "$results" --markdown "$markdown" --plots "$plots"
fi
if [ -n "$quick" ]; then
  echo "bench.sh: quick results in $results; report in $markdown, plots in $plots" >&2
fi
