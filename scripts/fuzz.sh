#!/usr/bin/env bash
# Runs Aurora's fuzz targets (all of them, or those named) one after another and prints how many inputs
# each executed. Usage: scripts/fuzz.sh [seconds-per-target] [target ...]
# Needs cargo-fuzz (cargo install cargo-fuzz). Runs on stable with no
# sanitizer (-s none) and debug assertions on (-a), so arithmetic overflow
# and every assert in the targets count as findings.
set -euo pipefail
secs=${1:-600}
shift || true
targets=("$@")
cd "$(dirname "$0")/../fuzz"
if [ ${#targets[@]} -eq 0 ]; then
  # Every target fuzz/Cargo.toml declares.
  mapfile -t targets < <(cargo fuzz list)
fi
cargo fuzz build -s none -O -a
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  log="target/fuzz-$t.log"
  if cargo fuzz run -s none -O -a "$t" -- -max_total_time="$secs" -rss_limit_mb=2048 >"$log" 2>&1; then
    runs=$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1)
    echo "$t: no finding; $runs(s)"
  else
    echo "$t: FINDING, see fuzz/$log and fuzz/artifacts/$t"
    tail -20 "$log"
  fi
done
