#!/usr/bin/env bash
# nvmf_kernel.sh - NVMe-oF interop between softrnic and the Linux kernel
# (issue 28, item 4), in the rxe guest of ../shared/rxe-vm (qemu TCG, Debian
# 6.1 kernel: nvme-rdma, nvme-tcp, nvmet-rdma, nvmet-tcp, nvme-cli 2.3).
#
#   host (netns rxetest, 10.77.0.1)              guest VM 0 (10.77.0.2)       VM 1 (10.77.0.3)
#   host-to-softrnic:
#     softrnic-nvmf target (NVMF_TARGET_CMD) <-- kernel host: discover,
#                                                connect, mkfs.ext4, files
#                                                + sha256, remount, [restart],
#                                                disconnect; rdma, then tcp
#     --target-vm: no softrnic; the target is the kernel's nvmet in VM 1 ------> nvmet (configfs)
#   softrnic-to-kernel:
#     softrnic-nvmf perf (NVMF_PERF_CMD) ------> nvmet-rdma + nvmet-tcp
#                                                (configfs, brd RAM namespace)
#     --kernel-host: no softrnic; a kernel host in VM 1 writes, reads and
#                    compares raw blocks instead (guest/nvmf-rw.sh) --------------> (VM 1 -> VM 0)
#
# Usage: tests/interop/nvmf_kernel.sh [options] host-to-softrnic|softrnic-to-kernel|kernel-loopback|all
#   kernel-loopback    one guest, no softrnic: its nvmet target and its host against each other
#                      (the guest image and the guest scripts, in ~40 s; not part of `all`)
#   --target-vm        host-to-softrnic against the kernel target in VM 1 (proves the guest side)
#   --kernel-host      softrnic-to-kernel with a kernel host in VM 1 instead of NVMF_PERF_CMD
#   --restart          host-to-softrnic: kill the target mid-I/O and restart it; the host
#                      must reconnect (--ctrl-loss-tmo) with the data intact
#   --transports LIST  "rdma tcp" (default), or one of them
#   --capture          tshark on the bridge: OUT/<mode>/<mode>.pcap (udp 4791 + tcp 4420), and
#                      its summary by nvmf_pcap.py (CM private data, opcodes, commands): <mode>-pcap.txt
#   --trace            nvme/nvmet trace events in the guests (nvme-host-trace.log, nvmet-trace.log)
#   -t S               guest command limit per VM (default 420)
# Environment:
#   RXE_VM           the rxe-vm folder (default: ../shared/rxe-vm next to the repository)
#   RXE_BUILD        its build folder with the NVMe guest (default $RXE_VM/build-nvme); build it with
#                    RXE_BUILD=$PWD/build-nvme EXTRA_PACKAGES="nvme-cli e2fsprogs" \
#                    EXTRA_MODULES="nvme-rdma nvme-tcp nvmet nvmet-rdma nvmet-tcp nvme-fabrics brd ext4" ./build-guest.sh
#   SRN_BUILD        softrnic build folder (default build/ in the repository)
#   NVMF_TARGET_CMD  host-side target; bash -c, with TADDR PORT NQN HOSTNQN NS_FILE NS_MB SRN_BUILD exported
#   NVMF_TARGET_WAIT seconds to let the target come up when tcp is not served (no port to watch), default 3
#   NVMF_PERF_CMD    host-side initiator, run once per transport with TR also exported; exit 0 = pass
#   NQN HOSTNQN NVMF_PORT NS_MB FILES FILE_KB CTRL_LOSS_TMO RESTART_DOWN
#   IDLE             host-to-softrnic: seconds without I/O after the remount step (default 0: none);
#                    the controller must stay live on keep-alives alone (kato 5 s)
#   NS_BACKING       kernel target namespace: ram (brd, default) or file (guest /tmp, buffered_io)
#   OUT              logs (default $RXE_BUILD/nvmf-kernel); each mode writes OUT/<mode>/, emptied first
# Softrnic's processes get SOFTRNIC_DEVICES=name=softrnic0,addr=10.77.0.1.
# Output: STEP lines and "nvmf_kernel: N passed, M failed"; logs in $OUT.  Exit 0 = all passed.
# Every wait is bounded; the script stops what it started and deletes the namespace on exit.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
RXE_VM=${RXE_VM:-$(cd "$SRC/.." && pwd)/shared/rxe-vm}
export RXE_BUILD=${RXE_BUILD:-$RXE_VM/build-nvme}
[ -f "$RXE_VM/netns.sh" ] || { echo "nvmf_kernel: no rxe-vm at $RXE_VM (set RXE_VM)" >&2; exit 2; }
# shellcheck source=/dev/null
. "$RXE_VM/netns.sh"

export SRN_BUILD=${SRN_BUILD:-$SRC/build}
export NQN=${NQN:-nqn.2026-12.io.softrnic:interop}
export HOSTNQN=${HOSTNQN:-nqn.2026-12.io.softrnic:kernel-host}
export PORT=${NVMF_PORT:-4420}
export NS_MB=${NS_MB:-64}
FILES=${FILES:-4}
FILE_KB=${FILE_KB:-1024}
CTRL_LOSS_TMO=${CTRL_LOSS_TMO:-120}
RESTART_DOWN=${RESTART_DOWN:-5}
IDLE=${IDLE:-0}
OUT_BASE=${OUT:-$RXE_BUILD/nvmf-kernel}
OUT=$OUT_BASE
# shellcheck disable=SC2016  # expanded by bash -c, with the variables above exported
NVMF_TARGET_CMD=${NVMF_TARGET_CMD:-'$SRN_BUILD/bin/softrnic run -- $SRN_BUILD/bin/softrnic-nvmf target --addr $TADDR --port $PORT --subsys $NQN --ns $NS_FILE --allow-host $HOSTNQN'}
# perf checks every block it reads (exit 1 on a mismatch): 4 KiB random mixed, then 32 KiB
# on 2 queues (beyond nvmet's in-capsule sizes: nvmet-rdma RDMA-Reads the data, nvmet-tcp
# sends R2Ts; digests on tcp), then a sequential write pass and a read pass over 8 MiB.
# shellcheck disable=SC2016
_PERF='$SRN_BUILD/bin/softrnic run -- $SRN_BUILD/bin/softrnic-nvmf perf -t $TR --addr $TADDR --port $PORT --subnqn $NQN --hostnqn $HOSTNQN'
# shellcheck disable=SC2016
NVMF_PERF_CMD=${NVMF_PERF_CMD:-"set -e; $_PERF --op rw --qd 8 --seconds 10; $_PERF --op rw --bs 32768 --qd 4 --queues 2 --seconds 8 \$([ \$TR = tcp ] && echo --digest); $_PERF --op write --seq --bs 32768 --size 8388608 --qd 4 --seconds 5; $_PERF --op read --seq --bs 32768 --size 8388608 --qd 4 --seconds 5"}
NVMF_TARGET_WAIT=${NVMF_TARGET_WAIT:-3}
SRN_DEVICES="name=softrnic0,addr=$RXE_HOST_IP"

TARGET_VM=0; KERNEL_HOST=0; RESTART=0; CAPTURE=0; TRACE=0; GTIMEOUT=420
TRTYPES="rdma tcp"
while [ $# -gt 0 ]; do
  case "$1" in
    --target-vm)   TARGET_VM=1; shift ;;
    --kernel-host) KERNEL_HOST=1; shift ;;
    --restart)     RESTART=1; shift ;;
    --transports)  TRTYPES=$2; shift 2 ;;
    --capture)     CAPTURE=1; shift ;;
    --trace)       TRACE=1; shift ;;
    -t)            GTIMEOUT=$2; shift 2 ;;
    -h|--help)     sed -n '2,47p' "$0"; exit 0 ;;
    -*)            echo "unknown option $1" >&2; exit 2 ;;
    *)             break ;;
  esac
done
MODE=${1:-}
case "$MODE" in host-to-softrnic|softrnic-to-kernel|kernel-loopback|all) ;; *) sed -n '19,30p' "$0" >&2; exit 2 ;; esac

log()  { printf '[nvmf_kernel %(%H:%M:%S)T] %s\n' -1 "$*"; }
PASS=0; FAIL=0
ok()   { PASS=$((PASS + 1)); log "PASS: $*"; }
bad()  { FAIL=$((FAIL + 1)); log "FAIL: $*"; }
since() { echo $(( $(date +%s) - $1 )); }

TGT_PID=""; TSHARK_PID=""; VM0_PID=""; CAP_FILE=""
share() { echo "$RXE_BUILD/runs/vm$1/share"; }

# ---------------------------------------------------------------- host-side softrnic target
target_start() {
  log "target: $NVMF_TARGET_CMD"
  # setsid: the target and everything it starts form one process group, ours to kill.
  setsid ip netns exec "$RXE_NS" timeout -k 5 $((GTIMEOUT + 300)) \
      env SOFTRNIC_DEVICES="$SRN_DEVICES" TADDR="$TADDR" NS_FILE="$NS_FILE" \
      bash -c "$NVMF_TARGET_CMD" >> "$OUT/target.log" 2>&1 < /dev/null &
  TGT_PID=$!
  if [[ " $TRTYPES " == *" tcp "* ]]; then
    for _ in $(seq 1 150); do
      ip netns exec "$RXE_NS" ss -Htln "sport = :$PORT" | grep -q . && break
      kill -0 "$TGT_PID" 2>/dev/null || break
      sleep 0.2
    done
  else
    sleep "$NVMF_TARGET_WAIT"
  fi
  kill -0 "$TGT_PID" 2>/dev/null || { log "target exited: $(tail -5 "$OUT/target.log")"; return 1; }
}
target_kill() {  # $1 = signal
  [ -n "$TGT_PID" ] || return 0
  kill "-$1" -- "-$TGT_PID" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 "$TGT_PID" 2>/dev/null || break; sleep 0.2; done
  kill -KILL -- "-$TGT_PID" 2>/dev/null
  wait "$TGT_PID" 2>/dev/null
  TGT_PID=""
}

# ---------------------------------------------------------------- guest commands
# The guest scripts get their settings as shell assignments in front of their text.
guest_cmd() {  # $1 = script in guest/, rest = NAME=value settings
  local f=$1; shift
  local a
  for a in "$@"; do printf "%s='%s'\n" "${a%%=*}" "${a#*=}"; done
  cat "$HERE/guest/$f"
}
# VM $1 runs the kernel target (detached); returns once it serves or failed.
vm_target_start() {
  local idx=$1 t0; t0=$(date +%s)
  "$RXE_VM/start-vm.sh" -n "$idx" --detach -t "$GTIMEOUT" -- "$(guest_cmd nvmf-target.sh \
      NQN="$NQN" TRTYPES="$TRTYPES" PORT="$PORT" NS_MB="$NS_MB" TRACE="$TRACE" HOLD="$GTIMEOUT" \
      NS_BACKING="${NS_BACKING:-ram}")" \
      > "$OUT/vm$idx-start.log" 2>&1 || { bad "VM $idx did not boot (see $OUT/vm$idx-start.log)"; return 1; }
  local s; s=$(share "$idx")
  for _ in $(seq 1 300); do
    [ -e "$s/target-ready" ] || [ -e "$s/target-failed" ] || [ -e "$s/rc" ] && break
    sleep 0.2
  done
  if [ -e "$s/target-ready" ]; then
    log "kernel target serving in VM $idx ($(since "$t0") s after qemu start)"
  else
    bad "kernel target in VM $idx did not come up"; cat "$s/out.log" 2>/dev/null; return 1
  fi
}
vm_target_stop() {  # $1 = idx, $2 = tag for the saved logs
  local s f; s=$(share "$1")
  : > "$s/stop"
  for _ in $(seq 1 100); do [ -e "$s/rc" ] && break; sleep 0.3; done
  for f in out.log target-dmesg.log nvmet-trace.log; do
    [ -f "$s/$f" ] && cp "$s/$f" "$OUT/$2-vm$1-$f"
  done
  cp "$RXE_BUILD/runs/vm$1/console.log" "$OUT/$2-vm$1-console.log" 2>/dev/null
  "$RXE_VM/stop-vm.sh" -n "$1" > /dev/null 2>&1
}
vm_port() {  # $1 = idx, $2 = down | up: the kernel target's stand-in for kill / restart
  local s; s=$(share "$1")
  : > "$s/port-$2"
  for _ in $(seq 1 100); do [ -e "$s/port-is-$2" ] && return 0; sleep 0.2; done
  return 1
}
# STEP lines of a guest's output -> PASS/FAIL here.
count_steps() {  # $1 = file, $2 = tag
  local n=0 st name rest
  while read -r _ st name rest; do
    n=$((n + 1))
    if [ "$st" = ok ]; then ok "$2 $name $rest"; else bad "$2 $name $rest"; fi
  done < <(grep '^STEP ' "$1")
  [ "$n" -gt 0 ] || bad "$2: no step ran (see $1)"
}

capture_start() {  # $1 = tag
  [ "$CAPTURE" = 1 ] || return 0
  ip netns exec "$RXE_NS" timeout $((GTIMEOUT + 600)) tshark -i "$RXE_BR" -F pcap \
      -f "udp port 4791 or tcp port $PORT" -w "$OUT/$1.pcap" -q > "$OUT/$1-tshark.log" 2>&1 &
  TSHARK_PID=$!
  CAP_FILE=$OUT/$1.pcap
  sleep 2
}
capture_stop() {  # and summarise the capture: $OUT/<mode>-pcap.txt
  [ -n "$TSHARK_PID" ] || return 0
  kill -INT "$TSHARK_PID" 2>/dev/null; wait "$TSHARK_PID" 2>/dev/null; TSHARK_PID=""
  timeout 300 python3 "$HERE/nvmf_pcap.py" --port "$PORT" "$CAP_FILE" > "${CAP_FILE%.pcap}-pcap.txt" 2>&1 &&
    log "capture: $CAP_FILE, summary ${CAP_FILE%.pcap}-pcap.txt"
}

cleanup() {
  [ -n "$VM0_PID" ] && kill "$VM0_PID" 2>/dev/null
  target_kill TERM
  capture_stop
  "$RXE_VM/stop-vm.sh" --all > /dev/null 2>&1
  rxe_netns_down
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- host-to-softrnic
host_to_softrnic() {
  local t0; t0=$(date +%s)
  local tag=host-to-softrnic
  [ "$TARGET_VM" = 1 ] && tag=host-to-kernel-vm
  OUT=$OUT_BASE/$tag; rm -rf "$OUT"; mkdir -p "$OUT"
  log "=== $tag ($TRTYPES), logs in $OUT"
  if [ "$TARGET_VM" = 1 ]; then
    TADDR=$(rxe_vm_ip 1)
    vm_target_start 1 || return
  else
    TADDR=$RXE_HOST_IP
    NS_FILE=$OUT/ns.img
    rm -f "$NS_FILE"; truncate -s "${NS_MB}M" "$NS_FILE"
    target_start || { bad "$tag: target did not start (see $OUT/target.log)"; return; }
  fi
  capture_start "$tag"
  local s0; s0=$(share 0)
  "$RXE_VM/start-vm.sh" -q -t "$GTIMEOUT" -- "$(guest_cmd nvmf-host.sh TADDR="$TADDR" NQN="$NQN" \
      PORT="$PORT" HOSTNQN="$HOSTNQN" TRTYPES="$TRTYPES" FILES="$FILES" FILE_KB="$FILE_KB" \
      RESTART="$RESTART" CTRL_LOSS_TMO="$CTRL_LOSS_TMO" TRACE="$TRACE" IDLE="$IDLE")" > "$OUT/$tag-host.log" 2>&1 &
  VM0_PID=$!
  # Serve the guest's restart requests (one per transport) until it is done.
  local deadline=$(( $(date +%s) + GTIMEOUT + 300 ))
  while kill -0 "$VM0_PID" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do
    if [ -e "$s0/restart-req" ]; then
      rm -f "$s0/restart-req"
      log "restart: killing the target (guest asked, mid-I/O)"
      if [ "$TARGET_VM" = 1 ]; then vm_port 1 down || log "restart: VM 1 did not take its ports down"
      else target_kill KILL; fi
      : > "$s0/target-killed"
      sleep "$RESTART_DOWN"
      if [ "$TARGET_VM" = 1 ]; then vm_port 1 up || log "restart: VM 1 did not bring its ports up"
      else target_start || log "restart: target did not come back"; fi
      log "restart: target back after ${RESTART_DOWN} s down"
      : > "$s0/restart-done"
    fi
    sleep 0.3
  done
  wait "$VM0_PID"; local rc=$?; VM0_PID=""
  capture_stop
  for f in host-dmesg.log nvme-host-trace.log; do [ -f "$s0/$f" ] && cp "$s0/$f" "$OUT/$tag-vm0-$f"; done
  cp "$RXE_BUILD/runs/vm0/console.log" "$OUT/$tag-vm0-console.log" 2>/dev/null
  count_steps "$OUT/$tag-host.log" "$tag"
  [ "$rc" = 0 ] || bad "$tag: guest exit status $rc (see $OUT/$tag-host.log)"
  if [ "$TARGET_VM" = 1 ]; then vm_target_stop 1 "$tag"; else target_kill TERM; fi
  "$RXE_VM/stop-vm.sh" -n 0 > /dev/null 2>&1
  log "=== $tag took $(since "$t0") s"
}

# ---------------------------------------------------------------- softrnic-to-kernel
softrnic_to_kernel() {
  local t0; t0=$(date +%s)
  local tag=softrnic-to-kernel
  [ "$KERNEL_HOST" = 1 ] && tag=kernel-vm-to-kernel
  OUT=$OUT_BASE/$tag; rm -rf "$OUT"; mkdir -p "$OUT"
  log "=== $tag ($TRTYPES), logs in $OUT"
  vm_target_start 0 || return
  TADDR=$(rxe_vm_ip 0)
  capture_start "$tag"
  if [ "$KERNEL_HOST" = 1 ]; then
    "$RXE_VM/start-vm.sh" -n 1 -q -t "$GTIMEOUT" -- "$(guest_cmd nvmf-rw.sh TADDR="$TADDR" NQN="$NQN" \
        PORT="$PORT" HOSTNQN="$HOSTNQN" TRTYPES="$TRTYPES" RW_MB=8 TRACE="$TRACE")" > "$OUT/$tag-host.log" 2>&1
    local rc=$?
    local s1; s1=$(share 1)
    for f in host-dmesg.log nvme-host-trace.log; do [ -f "$s1/$f" ] && cp "$s1/$f" "$OUT/$tag-vm1-$f"; done
    count_steps "$OUT/$tag-host.log" "$tag"
    [ "$rc" = 0 ] || bad "$tag: guest exit status $rc"
    "$RXE_VM/stop-vm.sh" -n 1 > /dev/null 2>&1
  else
    local TR t
    for TR in $TRTYPES; do
      t=$(date +%s)
      log "perf -t $TR: $NVMF_PERF_CMD"
      ip netns exec "$RXE_NS" timeout -k 5 "$GTIMEOUT" env SOFTRNIC_DEVICES="$SRN_DEVICES" \
          TADDR="$TADDR" TR="$TR" bash -c "$NVMF_PERF_CMD" > "$OUT/$tag-perf-$TR.log" 2>&1 < /dev/null
      local rc=$?
      tail -15 "$OUT/$tag-perf-$TR.log"
      if [ "$rc" = 0 ]; then ok "$tag perf-$TR ($(since "$t") s)"; else bad "$tag perf-$TR exit $rc (see $OUT/$tag-perf-$TR.log)"; fi
    done
  fi
  capture_stop
  vm_target_stop 0 "$tag"
  grep -E 'nvmet' "$OUT/$tag-vm0-target-dmesg.log" 2>/dev/null | tail -12
  log "=== $tag took $(since "$t0") s"
}

# ---------------------------------------------------------------- kernel-loopback
# One guest runs both guest scripts: the target in the background, the host against the
# guest's own address; a helper in the guest answers the host's restart requests with
# port-down / port-up, as the host side does for --target-vm.
kernel_loopback() {
  local t0; t0=$(date +%s)
  local tag=kernel-loopback
  OUT=$OUT_BASE/$tag; rm -rf "$OUT"; mkdir -p "$OUT"
  log "=== $tag ($TRTYPES), logs in $OUT"
  local ip0; ip0=$(rxe_vm_ip 0)
  local cmd
  cmd=$(
    echo "cat > /tmp/nvmf-target.sh <<'NVMF_EOF_TARGET'"
    guest_cmd nvmf-target.sh NQN="$NQN" TRTYPES="$TRTYPES" PORT="$PORT" NS_MB="$NS_MB" TRACE="$TRACE" \
        HOLD="$GTIMEOUT" NS_BACKING="${NS_BACKING:-ram}"
    echo "NVMF_EOF_TARGET"
    echo "cat > /tmp/nvmf-host.sh <<'NVMF_EOF_HOST'"
    guest_cmd nvmf-host.sh TADDR="$ip0" NQN="$NQN" PORT="$PORT" HOSTNQN="$HOSTNQN" TRTYPES="$TRTYPES" \
        FILES="$FILES" FILE_KB="$FILE_KB" RESTART="$RESTART" CTRL_LOSS_TMO="$CTRL_LOSS_TMO" TRACE="$TRACE" IDLE="$IDLE"
    echo "NVMF_EOF_HOST"
    cat <<EOF
sh /tmp/nvmf-target.sh > target.log 2>&1 &
i=0; while [ ! -e target-ready ] && [ ! -e target-failed ] && [ \$i -lt 300 ]; do sleep 0.2; i=\$((i + 1)); done
cat target.log
waitfor() { j=0; while [ ! -e "\$1" ] && [ \$j -lt 100 ]; do sleep 0.2; j=\$((j + 1)); done; }
( while [ ! -e stop ]; do
    if [ -e restart-req ]; then
      rm -f restart-req; : > port-down; waitfor port-is-down; : > target-killed
      sleep $RESTART_DOWN; : > port-up; waitfor port-is-up; : > restart-done
    fi
    sleep 0.3
  done ) &
sh /tmp/nvmf-host.sh; rc=\$?
: > stop; wait
cat target.log
exit \$rc
EOF
  )
  "$RXE_VM/start-vm.sh" -q -t "$GTIMEOUT" -- "$cmd" > "$OUT/$tag-host.log" 2>&1
  local rc=$?
  local s0 f; s0=$(share 0)
  for f in host-dmesg.log target-dmesg.log nvme-host-trace.log nvmet-trace.log; do
    [ -f "$s0/$f" ] && cp "$s0/$f" "$OUT/$tag-vm0-$f"
  done
  cp "$RXE_BUILD/runs/vm0/console.log" "$OUT/$tag-vm0-console.log" 2>/dev/null
  count_steps "$OUT/$tag-host.log" "$tag"
  [ "$rc" = 0 ] || bad "$tag: guest exit status $rc (see $OUT/$tag-host.log)"
  log "=== $tag took $(since "$t0") s"
}

# ---------------------------------------------------------------- main
[ "$(id -u)" = 0 ] || { echo "nvmf_kernel: must run as root" >&2; exit 77; }
[ -f "$RXE_BUILD/initrd.img" ] || { echo "nvmf_kernel: no guest in $RXE_BUILD; build it (see --help)" >&2; exit 77; }
grep -q nvme-cli "$RXE_BUILD/.extra-packages" 2>/dev/null || { echo "nvmf_kernel: $RXE_BUILD has no nvme-cli" >&2; exit 77; }
mkdir -p "$OUT_BASE"
"$RXE_VM/stop-vm.sh" --all > /dev/null 2>&1
rxe_netns_up
T0=$(date +%s)
case "$MODE" in
  host-to-softrnic)   host_to_softrnic ;;
  softrnic-to-kernel) softrnic_to_kernel ;;
  kernel-loopback)    kernel_loopback ;;
  all)                host_to_softrnic; softrnic_to_kernel ;;
esac
log "nvmf_kernel: $PASS passed, $FAIL failed in $(since "$T0") s (logs in $OUT_BASE)"
[ "$FAIL" = 0 ] && [ "$PASS" -gt 0 ]
