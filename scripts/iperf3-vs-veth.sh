#!/usr/bin/env bash
# iperf3 TCP between two network namespaces, first through Aurora (two IP
# hosts with TUN interfaces and an ATM switch, links over shared memory at
# OC-768c so the software, not the line, is the limit), then through a plain
# veth pair, in one run. Needs root, iproute2 and iperf3, and a release
# build (cargo build --release).
# Usage: scripts/iperf3-vs-veth.sh [seconds] [rate]
set -euo pipefail
secs=${1:-5}
rate=${2:-oc768}
cd "$(dirname "$0")/.."
A=target/release/aurora
tag="iv$$"
topo=$(mktemp /tmp/aurora-iperf-XXXX.toml)
sed -e "s/rate = \"oc12\"/rate = \"$rate\"/" -e "s/shm = \"aurora-/shm = \"aurora-$tag-/" examples/ip.toml >"$topo"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for n in a b va vb; do ip netns del "$tag-$n" 2>/dev/null || true; done
  rm -f "$topo"
}
trap cleanup EXIT
for n in a b va vb; do ip netns add "$tag-$n"; ip netns exec "$tag-$n" ip link set lo up; done

# Through Aurora.
$A node "$topo" --name sw --duration 600s >/dev/null 2>&1 & pids+=($!)
ip netns exec "$tag-a" $A node "$topo" --name h1 --duration 600s >/dev/null 2>&1 & pids+=($!)
ip netns exec "$tag-b" $A node "$topo" --name h2 --duration 600s >/dev/null 2>&1 & pids+=($!)
for _ in $(seq 50); do ip netns exec "$tag-a" ping -c1 -W1 10.1.0.2 >/dev/null 2>&1 && break; sleep 0.2; done
ip netns exec "$tag-b" iperf3 -s -1 -D
sleep 0.5
aurora=$(ip netns exec "$tag-a" iperf3 -c 10.1.0.2 -t "$secs" -J | grep -m1 -A8 '"sum_received"' | sed -n 's/.*"bits_per_second":[[:space:]]*\([0-9.e+]*\).*/\1/p' | head -1)

# Through a veth pair.
ip link add "$tag-x" type veth peer name "$tag-y"
ip link set "$tag-x" netns "$tag-va"; ip link set "$tag-y" netns "$tag-vb"
ip netns exec "$tag-va" ip addr add 10.9.0.1/24 dev "$tag-x"; ip netns exec "$tag-va" ip link set "$tag-x" up
ip netns exec "$tag-vb" ip addr add 10.9.0.2/24 dev "$tag-y"; ip netns exec "$tag-vb" ip link set "$tag-y" up
ip netns exec "$tag-vb" iperf3 -s -1 -D
sleep 0.5
veth=$(ip netns exec "$tag-va" iperf3 -c 10.9.0.2 -t "$secs" -J | grep -m1 -A8 '"sum_received"' | sed -n 's/.*"bits_per_second":[[:space:]]*\([0-9.e+]*\).*/\1/p' | head -1)

awk -v a="$aurora" -v v="$veth" -v r="$rate" 'BEGIN {
  printf "iperf3 TCP, %s links: through Aurora %.0f Mb/s, through a veth pair %.0f Mb/s, Aurora / veth %.3f\n", r, a/1e6, v/1e6, a/v }'
