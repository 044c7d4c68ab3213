#!/bin/bash
# test_iser_tgt.sh - Debian's tgt and libiscsi as real storage on softrnic
# (issue 23).  tgtd, unmodified, serves a file-backed LUN over iSER; the
# initiator side is libiscsi (its tools and tests/helpers/iser_rw.c); both load
# softrnic's libibverbs.so.1 and librdmacm.so.1 through LD_LIBRARY_PATH.
#
#   ┌ $NS_A ─────────────────────────────┐  veth  ┌ $NS_B ──────────────────────────────┐
#   │ 10.77.0.1                          │────────│ 10.77.0.2                           │
#   │ tgtd -f -C N, iSER target,         │        │ iscsi-inq, iscsi-readcapacity16,    │
#   │   LUN 1 = $work/lun.img (64 MiB)   │        │ iscsi-perf, iser_rw (libiscsi)      │
#   └────────────────────────────────────┘        └─────────────────────────────────────┘
#
#   1. tgtd in the foreground with a control socket of its own
#      (TGT_IPC_SOCKET in $work, and -C N), nothing done to its signal mask:
#      it used to die at its first disk I/O when softrnic's threads took its
#      SIGUSR2 (issue 23; now every softrnic thread blocks every signal)
#   2. tgtadm: an iSER target, LUN 1 on the file, the initiator's address
#      and name bound (tgt 1.0.85's iSER login refuses every initiator
#      unless an initiator-name ACL is bound)
#   3. iscsi-inq: a disk; under another initiator name: refused
#   4. iscsi-readcapacity16: the file's size
#   5. iscsi-perf, 3 s of 4 KiB reads: IOPS printed, no error
#   6. iser_rw: 32 MiB of a pattern written (WRITE(16)/WRITE(10)), read back
#      and compared; the backing file then holds the same bytes
#   7. 6 again, another pattern, with SOFTRNIC_FAULTS in the initiator: 1 %
#      of the RC packets dropped, 1 % reordered, 0.5 % duplicated, both ways
#   8. tgtd still alive and answering; stopped through tgtadm, exit 0; the
#      file checked once more; no sanitizer report in any log
# Skips (77) without root / ip netns, or without tgt or libiscsi-bin; CI
# installs them, and then a missing iser_rw (libiscsi-dev) is a failure.
# Under the ASan pass (SRN_ASAN_PRELOAD set) the unmodified programs get
# the ASan runtime preloaded.  Every wait is bounded.
set -u
source "$SRN_SRC/tests/lib/netns.sh"
srn_netns_require_root
for p in tgtd tgtadm; do
	command -v $p >/dev/null || srn_netns_skip "$p not installed (Debian package tgt)"
done
for p in iscsi-inq iscsi-readcapacity16 iscsi-perf; do
	command -v $p >/dev/null || srn_netns_skip "$p not installed (Debian package libiscsi-bin)"
done
RW=$SRN_BUILD/bin/iser_rw
if [ ! -x "$RW" ]; then
	echo "FAIL: $RW was not built: libiscsi-dev was missing when cmake ran (tests/iser.cmake)"
	exit 1
fi
LIB=$SRN_BUILD/lib
SR=$SRN_BUILD/bin/softrnic
TIQN=iqn.2024-01.org.softrnic:iser-tgt
IIQN=iqn.2024-01.org.softrnic:initiator
LUN_MB=64
RW_MB=32
start=$EPOCHREALTIME
fail=0
tpid=

# On tmpfs when there is room: tgtd's fdatasync for SYNCHRONIZE CACHE then
# costs nothing, where a slow disk could make it last over libiscsi 1.19's
# 1 s (see step 7).  The LUN and two patterns need 128 MiB.
tmp=${TMPDIR:-/tmp}
[ "$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')" -ge $((256 * 1024)) ] 2>/dev/null &&
	tmp=/dev/shm
work=$(mktemp -d "$tmp/srn-iser.XXXXXX")
chmod 755 "$work"
stop_tgtd_hard() {
	[ -n "$tpid" ] && kill -9 "$tpid" 2>/dev/null
	wait 2>/dev/null
}
srn_netns_at_exit "rm -rf '$work'"
srn_netns_at_exit stop_tgtd_hard
srn_netns_setup || { echo "FAIL: cannot set up the namespaces"; exit 1; }

# The unmodified programs (tgtd, libiscsi's tools) load the instrumented
# library in the ASan pass: the runtime first; their own leaks are not ours.
UNMOD=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] &&
	UNMOD=(LD_PRELOAD="$SRN_ASAN_PRELOAD" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
# A private control socket: $work/tgtd.$CPORT (and its .lock).
export TGT_IPC_SOCKET=$work/tgtd
CPORT=$((1000 + RANDOM % 31000))    # tgtd takes 0..32767
TA=(tgtadm -C "$CPORT")
URL="iser://$ADDR_A/$TIQN/1"

# ms_since T0: milliseconds since $EPOCHREALTIME was T0.
ms_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }'; }
bad() {
	echo "FAIL: $*"
	fail=1
}
# on_b SECS PROG ARGS...: PROG in namespace B on softrnic, at most SECS s
# (timeout's child is PROG itself: ip netns exec and env exec).  ON_B_STOP
# replaces the options of timeout(1).
on_b() {
	local secs=$1
	shift
	# shellcheck disable=SC2086 # ON_B_STOP is a list of options
	timeout ${ON_B_STOP:--k 5} "$secs" ip netns exec "$NS_B" env LD_LIBRARY_PATH="$LIB" \
		SOFTRNIC_DEVICES="name=softrnic0,addr=$ADDR_B" "$@"
}
# try_b LOG SECS PROG ARGS...: on_b, output in LOG.  tgt's iSER enters
# full-feature phase only when the send of the last login response
# completes, i.e. when the initiator's ACK for it has arrived; a first
# command that comes before that ACK makes tgtd close the connection
# ("non-login pdu during login phase").  softrnic once sent an ACK it held
# for the application's next post after that post's packets, and about one
# login in a hundred failed so; named here if it ever comes back.
try_b() {
	local log=$1 secs=$2 rc
	shift 2
	on_b "$secs" "$@" >"$log" 2>&1
	rc=$?
	[ $rc -ne 0 ] && grep -q 'non-login pdu during login phase' "$work/tgtd.log" &&
		echo "tgtd closed a login: a command reached it before the ACK of the last login response"
	return $rc
}
tgtd_alive() { [ -n "$tpid" ] && kill -0 "$tpid" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$tpid/status"; }
finish() {
	local san
	san=$(grep -l -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$work"/*.log 2>/dev/null)
	if [ -n "$san" ]; then
		for f in $san; do
			echo "--- sanitizer report in $(basename "$f"):"
			grep -m1 -A40 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$f"
		done
		fail=1
	fi
	if [ $fail -ne 0 ]; then
		echo "--- tgtd log (last 30 lines):"
		tail -30 "$work/tgtd.log" 2>/dev/null
		echo "FAIL: iser_tgt after $(ms_since "$start") ms"
		exit 1
	fi
	exit 0
}

# 1. tgtd.
truncate -s ${LUN_MB}M "$work/lun.img"
t0=$EPOCHREALTIME
ip netns exec "$NS_A" env "${UNMOD[@]}" LD_LIBRARY_PATH="$LIB" \
	SOFTRNIC_DEVICES="name=softrnic0,addr=$ADDR_A" tgtd -f -C "$CPORT" >"$work/tgtd.log" 2>&1 &
tpid=$!
for ((i = 0; i < 150; i++)); do
	"${TA[@]}" --op show --mode sys 2>/dev/null | grep -q 'iser: ready' && break
	tgtd_alive || break
	sleep 0.1
done
if ! "${TA[@]}" --op show --mode sys 2>/dev/null | grep -q 'iser: ready'; then
	bad "tgtd did not come up with its iser driver ready within 15 s"
	finish
fi
if ! grep -q "$(realpath "$LIB")/libibverbs.so" "/proc/$tpid/maps"; then
	bad "tgtd did not load softrnic's libibverbs.so.1 from $LIB"
	finish
fi
echo "ok: tgtd (pid $tpid) up on softrnic, iser ready, control port $CPORT, in $(ms_since "$t0") ms"

# 2. Target, LUN, ACLs.
if ! { "${TA[@]}" --lld iser --op new --mode target --tid 1 -T "$TIQN" &&
	"${TA[@]}" --lld iser --op new --mode logicalunit --tid 1 --lun 1 -b "$work/lun.img" &&
	"${TA[@]}" --lld iser --op bind --mode target --tid 1 -I "$ADDR_B" &&
	"${TA[@]}" --lld iser --op bind --mode target --tid 1 -Q "$IIQN"; } >"$work/tgtadm.log" 2>&1; then
	cat "$work/tgtadm.log"
	bad "tgtadm could not set up the iSER target"
	finish
fi
echo "ok: iSER target $TIQN, LUN 1 = ${LUN_MB} MiB file, ACL: $ADDR_B and $IIQN"

# 3. INQUIRY; another initiator name is refused.
t0=$EPOCHREALTIME
try_b "$work/inq.log" 20 "${UNMOD[@]}" iscsi-inq -i "$IIQN" "$URL"
rc=$?
if [ $rc -ne 0 ] || ! grep -q 'Peripheral Device Type:DIRECT_ACCESS' "$work/inq.log"; then
	cat "$work/inq.log"
	bad "iscsi-inq $URL (rc=$rc)"
	finish
fi
vendor=$(sed -n 's/^Vendor:\(.*\)/\1/p;s/^Product:\(.*\)/\1/p' "$work/inq.log" | tr -s ' ' | paste -sd' ')
on_b 20 "${UNMOD[@]}" iscsi-inq -i "${IIQN}-intruder" "$URL" >"$work/inq-intruder.log" 2>&1
rc=$?
if [ $rc -eq 0 ] || ! grep -q 'Login Failed' "$work/inq-intruder.log"; then
	cat "$work/inq-intruder.log"
	bad "an initiator name outside the ACL was not refused (rc=$rc)"
fi
echo "ok: iscsi-inq: a disk ($vendor); an unlisted initiator refused; $(ms_since "$t0") ms"

# 4. READ CAPACITY(16).
try_b "$work/cap.log" 20 "${UNMOD[@]}" iscsi-readcapacity16 -i "$IIQN" "$URL"
rc=$?
size=$(sed -n 's/^Total size:\([0-9]*\)$/\1/p' "$work/cap.log")
want=$(stat -c %s "$work/lun.img")
if [ $rc -ne 0 ] || [ "$size" != "$want" ]; then
	cat "$work/cap.log"
	bad "iscsi-readcapacity16 reports '${size}' bytes (rc=$rc), the file has $want"
else
	echo "ok: iscsi-readcapacity16: $size bytes, the backing file's size"
fi

# 5. iscsi-perf: 3 s of 4 KiB reads, 32 in flight, ended by one SIGINT (it
# finishes what is in flight and exits 0; a second SIGINT aborts it, so
# --foreground: timeout(1) otherwise signals its process group too).  Not
# its -t: it counts the seconds left down in an unsigned integer it
# compares with 0 once per second, so when two of its progress lines come
# 2 s apart (a busy host) the count wraps and it runs on forever.
ON_B_STOP="--foreground --preserve-status -s INT -k 20" \
	try_b "$work/perf.log" 3 "${UNMOD[@]}" iscsi-perf -i "$IIQN" "$URL"
rc=$?
tr '\r' '\n' <"$work/perf.log" >"$work/perf.txt"
iops=$(grep -o 'iops average [0-9]*' "$work/perf.txt" | tail -1 | awk '{print $3}')
if [ $rc -ne 0 ] || ! grep -q '^finished' "$work/perf.txt" || grep -qi 'failed' "$work/perf.txt" ||
	[ "${iops:-0}" -le 0 ]; then
	tail -5 "$work/perf.txt"
	bad "iscsi-perf (rc=$rc, iops average '${iops}')"
else
	echo "ok: iscsi-perf: $iops IOPS average (4 KiB reads, 32 in flight, 3 s)"
fi
[ $fail -eq 0 ] || finish

# rw NAME SECS [VAR=VALUE...]: iser_rw (with RW_ARGS) in B, pattern in
# $work/NAME.pat; then the LUN's first RW_MB MiB in the file must be that
# pattern, the rest still zeros.
RW_ARGS=()
rw() {
	local name=$1 secs=$2 rc
	shift 2
	t0=$EPOCHREALTIME
	try_b "$work/$name.log" "$secs" "$@" "$RW" "${RW_ARGS[@]}" -i "$IIQN" -m $RW_MB -s "$RANDOM" \
		-o "$work/$name.pat" "$URL"
	rc=$?
	if [ $rc -ne 0 ] || ! grep -q '^iser_rw: ok:' "$work/$name.log"; then
		grep -v '^softrnic ' "$work/$name.log" | head -20
		bad "iser_rw $name (rc=$rc)"
		return 1
	fi
	echo "ok: $name: $(sed -n 's/^iser_rw: ok: //p' "$work/$name.log"); $(ms_since "$t0") ms"
	if ! cmp -n $((RW_MB << 20)) "$work/$name.pat" "$work/lun.img"; then
		bad "$name: the backing file does not hold the pattern iser_rw wrote"
		return 1
	fi
	if ! cmp -n $(((LUN_MB - RW_MB) << 20)) -i $((RW_MB << 20)):0 "$work/lun.img" /dev/zero; then
		bad "$name: the backing file changed past the ${RW_MB} MiB written"
		return 1
	fi
	echo "ok: $name: the backing file holds the same ${RW_MB} MiB, zeros after"
}

# 6. Write, read back, compare; the file.
rw clean 60 || finish

# 7. The same through injected faults in the initiator's device, both
# ways, on RC packets only (the CM's MADs spared: a lost one costs a 4 s CM
# timeout): duplicate Sends, RDMA Write packets, READ requests and
# responses and ACKs must change nothing, and lost or reordered ones be
# recovered by go-back-N.  With loss a lost retransmission costs an ACK
# timeout, and libiscsi 1.19's synchronous calls over iSER fail when a
# command waits 1 s, so iser_rw -a 14 sets the connection's ACK timeout to
# 67 ms (librdmacm's default, as the kernel's, is 1.07 s), as newer
# libiscsi can do itself.  These once stalled a run now and then: the
# progress thread, asleep with no deadline, was not woken for a timer
# tgtd's main thread armed, nor for a packet the injector held (now it is:
# test_progress_wake).  SRN_ISER_FAULTS replaces the default faults;
# SRN_ISER_FAULT_SEED repeats a run's decisions.
seed=${SRN_ISER_FAULT_SEED:-$RANDOM}
rc_ops=$(printf '0x%02x|' $(seq 0 18))              # 0x00-0x12: every RC opcode
faults="${SRN_ISER_FAULTS:-drop=1,reorder=1,dup=0.5},opcode=${rc_ops%|},seed=$seed"
RW_ARGS=(-a 14)
rw faults 90 SOFTRNIC_FAULTS="$faults" SOFTRNIC_STATS=1 || {
	echo "(SOFTRNIC_FAULTS=$faults; SRN_ISER_FAULT_SEED=$seed repeats the decisions)"
	finish
}
# cnt NAME: a counter of the initiator's device (SOFTRNIC_STATS=1 lines).
cnt() { awk -v k="$1" '$1 == "softrnic" && $3 == k { v = $4 } END { print v + 0 }' "$work/faults.log"; }
reord=$(($(cnt fault_tx_reordered) + $(cnt fault_rx_reordered)))
dups=$(($(cnt fault_tx_duplicated) + $(cnt fault_rx_duplicated)))
drops=$(($(cnt fault_tx_dropped) + $(cnt fault_rx_dropped)))
if [ $((reord + dups + drops)) -gt 0 ]; then
	echo "ok: faults (seed $seed): the initiator's injector reordered $reord, duplicated $dups," \
		"dropped $drops packets; it counted $(cnt duplicate_request) duplicate requests," \
		"$(cnt seq_nak_sent) sequence NAKs sent, $(cnt retransmits) retransmissions"
else
	bad "faults: the injector did nothing (SOFTRNIC_FAULTS=$faults)"
fi

# 8. tgtd alive and answering; then stopped through tgtadm.
if ! tgtd_alive; then
	wait "$tpid"
	rc=$?
	tpid=
	bad "tgtd died (exit status $rc$([ $rc -gt 128 ] && echo ": signal $((rc - 128))"))"
	finish
fi
tstats=$("$SR" stat --dump --pid "$tpid" 2>/dev/null |
	awk -F'\t' '$4 == "dev" && ($5 == "retransmits" || $5 == "implied_nak_seq_err" || $5 == "rcvd_pkts") { printf "%s %s=%s", sep, $5, $6; sep = "," }')
sessions=$("${TA[@]}" --lld iser --op show --mode target 2>/dev/null | grep -c 'I_T nexus: ')
# tgt 1.0.85 crashes (a NULL call in conn_close) when a target is deleted
# while an iSER connection still waits for its TIMEWAIT_EXIT (1.07 s after
# the disconnect with librdmacm's default ACK timeout): wait for every one.
t0=$EPOCHREALTIME
for ((i = 0; i < 100; i++)); do
	[ "$(grep -c 'iser_cm_conn_established' "$work/tgtd.log")" -le \
		"$(grep -c 'iser_cm_timewait_exit.*after cleanup' "$work/tgtd.log")" ] && break
	sleep 0.1
done
tw=$(ms_since "$t0")
"${TA[@]}" --lld iser --op delete --mode target --tid 1 --force >>"$work/tgtadm.log" 2>&1 &&
	"${TA[@]}" --op delete --mode system >>"$work/tgtadm.log" 2>&1 ||
	bad "tgtadm could not stop tgtd: $(tail -2 "$work/tgtadm.log")"
for ((i = 0; i < 100; i++)); do
	tgtd_alive || break
	sleep 0.1
done
if tgtd_alive; then
	bad "tgtd still runs 10 s after 'tgtadm --op delete --mode system'"
else
	wait "$tpid"
	rc=$?
	tpid=
	if [ $rc -ne 0 ]; then
		bad "tgtd exited with status $rc$([ $rc -gt 128 ] && echo " (signal $((rc - 128)))")"
	else
		echo "ok: tgtd alive to the end (counters:$tstats; $sessions sessions left), stopped by tgtadm" \
			"(after $tw ms for connections in TIMEWAIT), exit 0"
	fi
fi
if ! cmp -n $((RW_MB << 20)) "$work/faults.pat" "$work/lun.img"; then
	bad "after tgtd stopped, the backing file does not hold the last pattern"
fi
[ $fail -eq 0 ] && echo "PASS: iser_tgt: tgt + libiscsi over iSER on softrnic, $(ms_since "$start") ms"
finish
