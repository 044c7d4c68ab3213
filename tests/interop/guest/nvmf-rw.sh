# nvmf-rw.sh - a kernel NVMe-oF host writes and reads back raw blocks (no
# filesystem): the stand-in, on a second guest, for softrnic-nvmf perf against
# the kernel target (nvmf_kernel.sh softrnic-to-kernel --kernel-host).
# Settings prepended by nvmf_kernel.sh: TADDR NQN PORT HOSTNQN TRTYPES RW_MB TRACE.
# Each transport writes RW_MB MiB of random data at its own offset with O_DIRECT,
# reads it back and compares; later transports also read the earlier regions.
set -u
say() { echo "[nvmf-rw $(cut -d' ' -f1 /proc/uptime)] $*"; }
FAILS=0
ok()  { echo "STEP ok $*"; }
bad() { echo "STEP FAIL $*"; FAILS=$((FAILS + 1)); }
mkdir -p /etc/nvme; echo "$HOSTNQN" > /etc/nvme/hostnqn
modprobe nvme-fabrics
for t in $TRTYPES; do modprobe "nvme-$t" || bad "modprobe-nvme-$t"; done
if [ "$TRACE" = 1 ]; then
  grep -q ' /sys/kernel/tracing ' /proc/mounts || mount -t tracefs nodev /sys/kernel/tracing
  echo 4096 > /sys/kernel/tracing/buffer_size_kb
  echo 1 > /sys/kernel/tracing/events/nvme/enable
fi
find_dev() {
  for b in /sys/block/nvme*n*; do
    [ -e "$b" ] || continue
    case ${b##*/} in nvme*c*) continue ;; esac
    [ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$NQN" ] && { echo "/dev/${b##*/}"; return 0; }
  done
  return 1
}
k=0; DONE=
for t in $TRTYPES; do
  out=$(timeout 60 nvme discover -t "$t" -a "$TADDR" -s "$PORT" -q "$HOSTNQN" 2>&1); rc=$?
  echo "$out"
  if [ $rc = 0 ] && echo "$out" | grep -q "subnqn: *$NQN"; then ok "discover-$t"; else bad "discover-$t rc $rc"; fi
  timeout 60 nvme connect -t "$t" -n "$NQN" -a "$TADDR" -s "$PORT" -q "$HOSTNQN"; rc=$?
  DEV=; i=0
  while [ $rc = 0 ] && [ $i -lt 100 ]; do DEV=$(find_dev) && break; sleep 0.2; i=$((i + 1)); done
  if [ $rc != 0 ] || [ -z "$DEV" ]; then bad "connect-$t rc $rc"; dmesg | tail -20; continue; fi
  ok "connect-$t $DEV"
  dd if=/dev/urandom of=/tmp/pat.$k bs=1M count="$RW_MB" 2>/dev/null
  if dd if=/tmp/pat.$k of="$DEV" bs=1M seek=$((k * RW_MB)) oflag=direct conv=fsync 2>/dev/null &&
     dd if="$DEV" of=/tmp/back bs=1M skip=$((k * RW_MB)) count="$RW_MB" iflag=direct 2>/dev/null &&
     cmp /tmp/pat.$k /tmp/back; then
    ok "rw-$t $RW_MB MiB written and read back"
  else bad "rw-$t"; fi
  for j in $DONE; do
    if dd if="$DEV" of=/tmp/back bs=1M skip=$((j * RW_MB)) count="$RW_MB" iflag=direct 2>/dev/null && cmp /tmp/pat.$j /tmp/back; then
      ok "cross-$t region $j (written earlier over another transport) intact"
    else bad "cross-$t region $j"; fi
  done
  DONE="$DONE $k"; k=$((k + 1))
  timeout 60 nvme disconnect -n "$NQN" && ok "disconnect-$t" || bad "disconnect-$t"
done
dmesg > host-dmesg.log
[ "$TRACE" = 1 ] && cat /sys/kernel/tracing/trace > nvme-host-trace.log
say "done, $FAILS failed"
[ $FAILS = 0 ]
