# nvmf-target.sh - the kernel's NVMe-oF target (nvmet) in the rxe guest, set up
# through configfs.  Runs as the guest command of start-vm.sh (dash, cwd = the
# 9p share); nvmf_kernel.sh prepends the settings:
#   NQN       subsystem NQN                    PORT     service id (4420)
#   TRTYPES   transports, e.g. "rdma tcp"      NS_MB    RAM namespace size, MiB
#   TRACE     1: nvmet trace events on, dumped to nvmet-trace.log at the end
#   HOLD      seconds to serve at most
#   NS_BACKING ram (brd, the default) or file (a file in the guest's /tmp)
# Serves until the host creates `stop` in the share.  Meanwhile it obeys
# `port-down` (every port's subsystem link removed: nvmet drops the host's
# controllers, as a dead target would; answered by `port-is-down`) and
# `port-up` (links back; `port-is-up`).  Writes `target-ready` once listening.
set -u
say() { echo "[nvmf-target $(cut -d' ' -f1 /proc/uptime)] $*"; }
die() { say "ERROR: $*"; : > target-failed; exit 1; }
IP=$(sed -n 's/^GUEST_IPV4=\(.*\)\/.*/\1/p' guest-info)
C=/sys/kernel/config/nvmet

# The namespace: a brd RAM disk (/dev/ram0); survives port-down/up, not a reboot.
# NS_BACKING=file, or no brd in the guest: a file on the guest's tmpfs, served with buffered I/O
# (6.1's tmpfs has no O_DIRECT, which nvmet's file backend uses by default).
if [ "${NS_BACKING:-ram}" = ram ] && modprobe brd rd_nr=1 rd_size=$((NS_MB * 1024)) max_part=0; then
  NSDEV=/dev/ram0
else
  NSDEV=/tmp/nvmf-ns.img
  truncate -s "${NS_MB}M" $NSDEV || die "no brd and no room for $NSDEV"
fi
modprobe nvmet || die "modprobe nvmet"
for t in $TRTYPES; do modprobe "nvmet-$t" || die "modprobe nvmet-$t"; done
grep -q ' /sys/kernel/config ' /proc/mounts || mount -t configfs none /sys/kernel/config
if [ "$TRACE" = 1 ]; then
  grep -q ' /sys/kernel/tracing ' /proc/mounts || mount -t tracefs nodev /sys/kernel/tracing
  echo 4096 > /sys/kernel/tracing/buffer_size_kb
  echo 1 > /sys/kernel/tracing/events/nvmet/enable || say "no nvmet trace events"
fi

S=$C/subsystems/$NQN
mkdir "$S" || die "mkdir $S"
echo 1 > "$S/attr_allow_any_host"
mkdir "$S/namespaces/1"
printf '%s' $NSDEV > "$S/namespaces/1/device_path"
[ -f $NSDEV ] && echo 1 > "$S/namespaces/1/buffered_io"
echo 1 > "$S/namespaces/1/enable" || die "namespace enable"
i=1
for t in $TRTYPES; do
  P=$C/ports/$i
  mkdir "$P"
  echo "$IP" > "$P/addr_traddr"
  echo "$t" > "$P/addr_trtype"
  echo "$PORT" > "$P/addr_trsvcid"
  echo ipv4 > "$P/addr_adrfam"
  ln -s "$S" "$P/subsystems/$NQN" || die "port $i ($t): link failed"
  say "port $i: $t $IP:$PORT -> $NQN"
  i=$((i + 1))
done
dmesg | grep -i nvmet
: > target-ready

links() {  # $1 = down | up
  for P in "$C"/ports/*; do
    if [ "$1" = down ]; then rm -f "$P/subsystems/$NQN"; else ln -s "$S" "$P/subsystems/$NQN"; fi
  done
}
end=$(( $(cut -d. -f1 /proc/uptime) + HOLD ))
while [ ! -e stop ] && [ "$(cut -d. -f1 /proc/uptime)" -lt "$end" ]; do
  if [ -e port-down ]; then rm -f port-down port-is-up; links down; say "ports down"; : > port-is-down; fi
  if [ -e port-up ]; then rm -f port-up port-is-down; links up; say "ports up"; : > port-is-up; fi
  sleep 0.3
done
say "stopping"
dmesg > target-dmesg.log
[ "$TRACE" = 1 ] && cat /sys/kernel/tracing/trace > nvmet-trace.log
for P in "$C"/ports/*; do rm -f "$P/subsystems/$NQN"; rmdir "$P"; done
echo 0 > "$S/namespaces/1/enable"; rmdir "$S/namespaces/1" "$S"
say "done"
