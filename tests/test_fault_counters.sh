#!/bin/bash
# After a seeded fault-injection run the counters of both ends agree with
# what the injector did and with what the transport did about it:
#   server TX: drop 5 %, corrupt 3 %;  client TX: duplicate 3 %
#   client rcvd_pkts  == server sent_pkts - server fault_tx_dropped
#   client bad_icrc   == server fault_tx_corrupted
#   server rcvd_pkts  == client sent_pkts + client fault_tx_duplicated
#   server retransmits > 0 (losses were recovered by go-back-N)
#   client seq_nak_sent <= server packet_seq_err <= that + client duplicates
# Debian's ibv_rc_pingpong through softrnic, counters from SOFTRNIC_STATS.
set -u
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
port=$((20000 + RANDOM % 12000))
export SOFTRNIC_STATS=1 SOFTRNIC_DIAG=0
# Each side its own address: the counts are of these two processes' link
# alone, with no other process of a shared address in between.
export SOFTRNIC_DEVICES=name=softrnic0,addr=auto,share=0
# Only the server's SEND packets (FIRST/MIDDLE/LAST of a 3000-byte message)
# are damaged, never its ACKs: with lossy ACKs the last ACK of the run can
# be lost after the server has exited, and the client then ends in
# RETRY_EXC_ERR exactly as it would on a real lossy link.
# shellcheck disable=SC2046
env $(srn_pp_env) SOFTRNIC_FAULTS="tx.drop=5,tx.corrupt=3,opcode=0x00|0x01|0x02,seed=11" timeout -k 5 120 \
    "$SOFTRNIC" run -- ibv_rc_pingpong -g 0 -p $port -n 300 -s 3000 >"$dir/s" 2>&1 &
spid=$!
srn_pp_wait_listen "" $port || { echo "FAIL: server did not listen"; cat "$dir/s"; exit 1; }
# shellcheck disable=SC2046
env $(srn_pp_env) SOFTRNIC_FAULTS=tx.dup=3,seed=12 timeout -k 5 120 \
    "$SOFTRNIC" run -- ibv_rc_pingpong -g 0 -p $port -n 300 -s 3000 127.0.0.1 >"$dir/c" 2>&1
crc=$?
wait $spid
src=$?
if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
    echo "FAIL: pingpong failed (server $src, client $crc)"; cat "$dir/s" "$dir/c"; exit 1
fi
get() { awk -v n="$2" '$1 == "softrnic" && $3 == n { print $4; f = 1 } END { if (!f) print 0 }' "$dir/$1"; }
s_sent=$(get s sent_pkts); s_rcvd=$(get s rcvd_pkts); s_drop=$(get s fault_tx_dropped)
s_corr=$(get s fault_tx_corrupted); s_retx=$(get s retransmits); s_pse=$(get s packet_seq_err)
c_sent=$(get c sent_pkts); c_rcvd=$(get c rcvd_pkts); c_dup=$(get c fault_tx_duplicated)
c_bad=$(get c bad_icrc); c_nak=$(get c seq_nak_sent)
echo "server: sent $s_sent rcvd $s_rcvd dropped $s_drop corrupted $s_corr retransmits $s_retx packet_seq_err $s_pse"
echo "client: sent $c_sent rcvd $c_rcvd duplicated $c_dup bad_icrc $c_bad seq_nak_sent $c_nak"
fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1 ($2)"; fail=1; fi; }
check "faults happened" "[ $s_drop -gt 0 ] && [ $s_corr -gt 0 ] && [ $c_dup -gt 0 ]"
# A peer may exit with packets of the other's still unread: an ACK answering
# a retransmission that crossed the final ACK, or, on a loaded machine, a
# timer resend of the last 3-packet message (-s 3000 at MTU 1024) that left
# after the peer had its answer. Allow up to two such messages (6 packets);
# a corrupted packet among the unread ones is not counted as bad ICRC.
inflight() { [ "$1" -le "$2" ] && [ "$1" -ge $(($2 - 6)) ]; }
c_unread=$((s_sent - s_drop - c_rcvd))
check "client received = server sent - dropped (- in flight at exit)" "inflight $c_rcvd $((s_sent - s_drop))"
check "client bad ICRC = server corrupted (- unread at exit)" "[ $c_bad -le $s_corr ] && [ $c_bad -ge $((s_corr - c_unread)) ]"
check "server received = client sent + duplicated (- in flight at exit)" "inflight $s_rcvd $((c_sent + c_dup))"
check "losses recovered by retransmission" "[ $s_retx -gt 0 ]"
check "sequence NAKs sent were received" "[ $s_pse -ge $c_nak ] && [ $s_pse -le $((c_nak + c_dup)) ]"
exit $fail
