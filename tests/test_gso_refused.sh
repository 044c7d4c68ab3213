#!/bin/bash
# test_gso_refused.sh - a path that refuses UDP GSO costs no data.
#
# Some paths refuse a UDP GSO send (an IPsec route; before Linux 6.11 a
# device without TX checksum offload).  softrnic sends a whole burst in one
# sendmmsg; when the refused run is not its first message, Linux returns
# the count sent before it and drops the error.  The flush must ask again
# for the rest, see the refusal, switch GSO off and send those packets one
# by one.  gso_refuse_preload.so plays that path for `softrnic perf` over
# the UDP link, with 3-packet Writes (MTU 1024): a single first packet
# (RETH) followed by a GSO run of two.
#
# Checks, for UC Write bandwidth (no retransmission to hide a loss: the
# data check fails if a tail is lost) and RC Write latency (both ends
# send): the run passes its data checks, each sending process is refused
# once (then plain sends) and says so once (SOFTRNIC_LOG=warn), and RC
# needed no retransmission for a lost run (a few ACK timeouts of a starved
# peer are allowed; a lost run costs one per Write).
set -u
: "${SRN_BUILD:?SRN_BUILD must point at the build directory}"
SOFTRNIC="$SRN_BUILD/bin/softrnic"
LIB="$SRN_BUILD/lib/libgso_refuse_preload.so"

bad=0
fail() { echo "FAIL: $*"; bad=1; }
ok() { echo "ok: $*"; }

[ -x "$SOFTRNIC" ] || { echo "FAIL: $SOFTRNIC not built"; exit 1; }
[ -e "$LIB" ] || { echo "FAIL: $LIB not built"; exit 1; }
unset SOFTRNIC_DEVICES SOFTRNIC_CONFIG SOFTRNIC_PCAP SOFTRNIC_FAULTS SOFTRNIC_NO_GSO
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Under ASan the sanitizer runtime has to come first (scripts/test.sh).
preload="${SRN_ASAN_PRELOAD:+$SRN_ASAN_PRELOAD:}$LIB"

# run NAME ARGS...: softrnic perf over UDP through the refusing path.
run() {
	local name=$1
	shift
	SOFTRNIC_SHM=0 SOFTRNIC_STATS=1 SOFTRNIC_LOG=warn GSO_REFUSE_REPORT=1 LD_PRELOAD="$preload" \
		timeout -k 5 60 "$SOFTRNIC" perf --loopback -m 1024 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
	rc=$?
}

# refusals FILE: per process that was refused, how often, sorted ("1 2 ").
# Once GSO is off for good a process is refused no more: 1 if its first
# refused run led its sendmmsg, 2 if it followed a single (the count comes
# back first, the error when the flush asks again).  Without that second
# ask the refusal is never seen and every Write is refused.
refusals() {
	sed -n 's/^gso_refuse_preload: pid \([0-9]*\) refused a GSO message$/\1/p' "$1" | sort | uniq -c |
		awk '{ print $1 }' | sort -n | tr '\n' ' '
}
# once_each FILE N: N processes were refused, each once or twice.
once_each() {
	local r
	r=$(refusals "$1")
	[ "$(wc -w <<<"$r")" -eq "$2" ] && ! grep -qvE '^[12]$' <(tr ' ' '\n' <<<"$r" | sed '/^$/d')
}

run uc -c uc -o write -T bw -s 3072 -n 300
r=$(refusals "$tmp/uc.err")
if [ "$rc" -ne 0 ]; then
	fail "UC Write bw through a GSO-refusing path: rc $rc: $(grep -v '^softrnic ' "$tmp/uc.err" | head -5)"
elif ! once_each "$tmp/uc.err" 1; then
	# The UC target sends nothing; the writer is refused once, then
	# sends plainly.
	fail "UC Write bw: GSO refusals per refused process '$r', want one process, 1 or 2"
elif [ "$(grep -c 'the path refused a UDP GSO send (Input/output error): one datagram per packet' \
	"$tmp/uc.err")" -ne 1 ]; then
	fail "UC Write bw: no (or more than one) SOFTRNIC_LOG warning about the refused GSO send"
else
	ok "UC Write bw, 300 x 3 KiB through a GSO-refusing path: data intact, refused once"
fi

run rc -o write -T lat -s 3072 -n 300
r=$(refusals "$tmp/rc.err")
retrans=$(awk '$3 == "retransmits" || $3 == "local_ack_timeout_err" { s += $4 } END { print s + 0 }' \
	"$tmp/rc.err")
if [ "$rc" -ne 0 ]; then
	fail "RC Write lat through a GSO-refusing path: rc $rc: $(grep -v '^softrnic ' "$tmp/rc.err" | head -5)"
elif ! once_each "$tmp/rc.err" 2; then
	fail "RC Write lat: GSO refusals per refused process '$r', want two processes, 1 or 2 each"
elif [ "$retrans" -gt 30 ]; then
	# An unseen refusal loses the tail of every one of the 300 Writes
	# (300+ ACK timeouts). A handful is a peer starved past the 67 ms
	# ACK timeout on a loaded machine, not a lost run.
	fail "RC Write lat: $retrans retransmissions/ACK timeouts (refused runs were lost)"
else
	ok "RC Write lat, 300 x 3 KiB each way through a GSO-refusing path: refused once per side, $retrans retransmissions"
fi

# Without the preload the same runs use GSO (the path above was real).
SOFTRNIC_SHM=0 SOFTRNIC_STATS=1 timeout -k 5 60 "$SOFTRNIC" perf --loopback -m 1024 -c uc -o write \
	-T bw -s 3072 -n 300 >"$tmp/plain.out" 2>"$tmp/plain.err"
[ $? -eq 0 ] && ok "the same UC run without the preload" || fail "UC run without the preload failed"

exit "$bad"
