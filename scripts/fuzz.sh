#!/usr/bin/env bash
# Runs Aurora's fuzz targets one after another and prints how many inputs
# each executed. Usage: scripts/fuzz.sh [seconds-per-target] [target ...]
# Needs cargo-fuzz (cargo install cargo-fuzz). Runs on stable with no
# sanitizer (-s none) and debug assertions on (-a), so arithmetic overflow
# and every assert in the targets count as findings.
set -euo pipefail
secs=${1:-600}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(cell oam aal5_trailer aal34_pdu delineation aal5_reassembly aal34_reassembly udp_datagram qos_text topology encap_atmarp ip_node atomic_wire atomic_node traffic_host cell_port tcp_segment tcp_reasm tcp_conn stripe_rx video_command video_val)
fi
cd "$(dirname "$0")/../fuzz"
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
