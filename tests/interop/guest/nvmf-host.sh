# nvmf-host.sh - the kernel's NVMe-oF host (nvme-rdma / nvme-tcp, nvme-cli) in
# the rxe guest mounts a filesystem from a target.  Runs as the guest command
# of start-vm.sh (dash, cwd = the 9p share); nvmf_kernel.sh prepends:
#   TADDR NQN PORT HOSTNQN  target address, subsystem, service id, our host NQN
#   TRTYPES        transports in order, e.g. "rdma tcp"
#   FILES FILE_KB  files written per transport and their size
#   RESTART        1: target restart step (asks the host side through the share:
#                  writes `restart-req`, the host kills and restarts the target
#                  and answers `restart-done`)
#   CTRL_LOSS_TMO  nvme connect --ctrl-loss-tmo (s)
#   IDLE           seconds without I/O after the remount step (0: no idle step); the
#                  controller must stay live on keep-alives alone
#   TRACE          1: nvme host trace events on, dumped to nvme-host-trace.log
# Prints `STEP ok|FAIL <name> ...` per step; exits 1 if any step failed.
set -u
say() { echo "[nvmf-host $(cut -d' ' -f1 /proc/uptime)] $*"; }
FAILS=0
ok()   { echo "STEP ok $*"; }
bad()  { echo "STEP FAIL $*"; FAILS=$((FAILS + 1)); }
now()  { cut -d' ' -f1 /proc/uptime; }
MNT=/mnt/nvme
mkdir -p $MNT /etc/nvme
echo "$HOSTNQN" > /etc/nvme/hostnqn
modprobe -a ext4 nvme-fabrics || bad modprobe
for t in $TRTYPES; do modprobe "nvme-$t" || bad "modprobe-nvme-$t"; done
if [ "$TRACE" = 1 ]; then
  grep -q ' /sys/kernel/tracing ' /proc/mounts || mount -t tracefs nodev /sys/kernel/tracing
  echo 4096 > /sys/kernel/tracing/buffer_size_kb
  echo 1 > /sys/kernel/tracing/events/nvme/enable || say "no nvme trace events"
fi

# The block device of $NQN (the multipath head nvmeXnY, not the hidden nvmeXcYnZ path).
find_dev() {
  for b in /sys/block/nvme*n*; do
    [ -e "$b" ] || continue
    case ${b##*/} in nvme*c*) continue ;; esac
    [ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$NQN" ] && { echo "/dev/${b##*/}"; return 0; }
  done
  return 1
}
find_ctrl() {
  for c in /sys/class/nvme/nvme*; do
    [ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$NQN" ] && [ "$(cat "$c/transport")" = "$1" ] && { echo "${c##*/}"; return 0; }
  done
  return 1
}
write_files() {  # $1 = prefix, $2 = count, $3 = sums file
  i=1
  while [ $i -le "$2" ]; do
    dd if=/dev/urandom of="$MNT/$1.$i" bs=1024 count="$FILE_KB" conv=fsync 2>/dev/null || return 1
    (cd $MNT && sha256sum "$1.$i") >> "$3"
    i=$((i + 1))
  done
}
check_sums() { (cd $MNT && sha256sum -c --quiet "$1"); }
remount() { umount $MNT && mount "$DEV" $MNT; }
# After a failed step: leave nothing mounted or connected for the next transport.
give_up() { umount $MNT 2>/dev/null; timeout 60 nvme disconnect -n "$NQN" > /dev/null 2>&1; }

# Target restart: a writer keeps writing while the host side kills and restarts the
# target; files from before the kill and every file the writer finished must be intact.
restart_step() {
  t=$1
  rm -f restart-req restart-done target-killed /tmp/during.sums
  : > /tmp/during.sums
  (
    n=1
    while [ $n -le 200 ]; do
      [ -e restart-done ] && [ -z "${seen:-}" ] && seen=$n
      [ -n "${seen:-}" ] && [ $n -ge $((seen + 3)) ] && break
      dd if=/dev/urandom of="$MNT/during.$n" bs=1024 count=256 conv=fsync 2>/dev/null || exit 1
      (cd $MNT && sha256sum "during.$n") >> /tmp/during.sums
      n=$((n + 1))
    done
  ) &
  WPID=$!
  sleep 2
  say "asking the host side to kill the target (mid-I/O, writer pid $WPID)"
  : > restart-req
  r0=$(now)
  i=0; while [ ! -e target-killed ] && [ $i -lt 300 ]; do sleep 0.2; i=$((i + 1)); done
  [ -e target-killed ] || { bad "restart-$t no target-killed from the host side"; kill $WPID; return; }
  i=0; while [ ! -e restart-done ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i + 1)); done
  [ -e restart-done ] || { bad "restart-$t no restart-done from the host side"; kill $WPID; return; }
  # bounded wait for the writer: its I/O waits in the kernel until the reconnect
  i=0; while kill -0 $WPID 2>/dev/null && [ $i -lt $((CTRL_LOSS_TMO * 5 + 300)) ]; do sleep 0.2; i=$((i + 1)); done
  if kill -0 $WPID 2>/dev/null; then kill $WPID; bad "restart-$t writer still blocked"; return; fi
  wait $WPID; wrc=$?
  c=$(find_ctrl "$t")
  st=$(cat /sys/class/nvme/$c/state 2>/dev/null)
  dmesg | grep -E 'nvme.*(reconnect|Reconnect|starting error recovery|queue.*disconnect|Removing ctrl)' | tail -8
  nd=$(wc -l < /tmp/during.sums)
  if [ "$wrc" = 0 ] && [ "$st" = live ] && check_sums /tmp/sums.$t && check_sums /tmp/during.sums && remount &&
      check_sums /tmp/sums.$t && check_sums /tmp/during.sums; then
    ok "restart-$t ctrl $c live again $(awk -v a="$r0" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}') s after the request; $FILES files from before and $nd written across the restart intact after a remount"
  else
    bad "restart-$t writer rc $wrc, ctrl state '$st', sums or remount failed"
  fi
}

PREV=
for t in $TRTYPES; do
  say "=== transport $t: $TADDR:$PORT $NQN"
  t0=$(now)
  out=$(timeout 60 nvme discover -t "$t" -a "$TADDR" -s "$PORT" -q "$HOSTNQN" 2>&1); rc=$?
  echo "$out"
  if [ $rc = 0 ] && echo "$out" | grep -q "subnqn: *$NQN"; then ok "discover-$t"; else bad "discover-$t rc $rc"; fi
  timeout 60 nvme connect -t "$t" -n "$NQN" -a "$TADDR" -s "$PORT" -q "$HOSTNQN" \
      --ctrl-loss-tmo="$CTRL_LOSS_TMO" --reconnect-delay=2; rc=$?
  DEV=; i=0
  while [ $rc = 0 ] && [ $i -lt 100 ]; do DEV=$(find_dev) && break; sleep 0.2; i=$((i + 1)); done
  if [ $rc != 0 ] || [ -z "$DEV" ]; then bad "connect-$t rc $rc, no block device"; dmesg | tail -20; give_up; continue; fi
  c=$(find_ctrl "$t")
  ok "connect-$t $c $DEV $(cat /sys/block/${DEV#/dev/}/size) sectors"
  for a in transport address state cntlid queue_count sqsize kato ctrl_loss_tmo reconnect_delay fast_io_fail_tmo; do
    printf '  %s=%s\n' $a "$(cat /sys/class/nvme/$c/$a 2>/dev/null)"
  done
  dmesg | grep -E 'nvme|nvmet' | tail -6
  if [ -n "$PREV" ]; then
    # The same namespace through the other transport: the previous files are there.
    if mount "$DEV" $MNT && check_sums "/tmp/sums.$PREV"; then
      ok "cross-$t files written over $PREV read back over $t"
    else bad "cross-$t files written over $PREV"; fi
    umount $MNT 2>/dev/null
  fi
  rm -f /tmp/sums.$t; : > /tmp/sums.$t
  if mkfs.ext4 -q -F "$DEV" && mount "$DEV" $MNT; then ok "mkfs-$t"; else bad "mkfs-$t"; give_up; continue; fi
  if write_files "f$t" "$FILES" /tmp/sums.$t && sync; then ok "write-$t $FILES x $FILE_KB KiB"; else bad "write-$t"; fi
  if remount && check_sums /tmp/sums.$t; then ok "remount-$t sums match"; else bad "remount-$t"; fi
  if [ "${IDLE:-0}" -gt 0 ]; then
    # Keep-alive only: no I/O for IDLE s (several KATO periods), then the data again.
    e0=$(dmesg | grep -c 'starting error recovery')
    sleep "$IDLE"
    st=$(cat /sys/class/nvme/$c/state 2>/dev/null)
    e1=$(dmesg | grep -c 'starting error recovery')
    if [ "$st" = live ] && [ "$e1" = "$e0" ] && remount && check_sums /tmp/sums.$t; then
      ok "idle-$t ${IDLE} s without I/O (kato $(cat /sys/class/nvme/$c/kato) s): still live, no recovery, sums match"
    else bad "idle-$t state '$st', error recoveries $e0 -> $e1"; fi
  fi
  [ "$RESTART" = 1 ] && restart_step "$t"
  umount $MNT || bad "umount-$t"
  out=$(timeout 60 nvme disconnect -n "$NQN" 2>&1); rc=$?
  echo "$out"
  if [ $rc = 0 ] && ! find_dev >/dev/null; then ok "disconnect-$t ($(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}') s for $t)"; else bad "disconnect-$t rc $rc"; fi
  PREV=$t
done
dmesg > host-dmesg.log
[ "$TRACE" = 1 ] && cat /sys/kernel/tracing/trace > nvme-host-trace.log
say "done, $FAILS failed"
[ $FAILS = 0 ]
