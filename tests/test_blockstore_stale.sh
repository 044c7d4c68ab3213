#!/bin/bash
# test_blockstore_stale.sh MODE - the rkey lifecycle done wrong, and
# `softrnic explain` telling the story (issue 15).
#
#   server ── moves its cache (SIGUSR1): disconnect all, dereg the old region
#   client "good"   reconnects, takes the new rkey from the hello: clean
#   client "stale"  --stale-rkey: reconnects but keeps the first rkey, so
#                   its Writes hit the released region: REM_ACCESS_ERR,
#                   three in a row and it fails its requests (-EACCES)
#   softrnic explain ── "stale rkey: pid <stale> keeps using rkey K after
#                   pid <server> deregistered it", the region, the new key
#
# MODE: shm (same-host rings) or udp (SOFTRNIC_SHM=0).  Exit 0/1/77.
set -u
MODE=${1:?usage: test_blockstore_stale.sh shm|udp}
export SOFTRNIC_DIAG_DIR SOFTRNIC_DIAG_KEEP=1
SOFTRNIC_DIAG_DIR=$(mktemp -d)
source "$SRN_SRC/tests/lib/blockstore_lib.sh"
trap 'cleanup; rm -rf "$SOFTRNIC_DIAG_DIR"' EXIT

start_server
client good --op write --qd 4 --seconds 3 --verify-end --start 0 --count 200 --writer 1
good=$!
client stale --op write --qd 4 --seconds 3 --start 200 --count 200 --writer 2 --stale-rkey
stale=$!
sleep 1
kill -USR1 "$spid"
wait "$good"; check good $? && echo "ok: $MODE: a correct client took the new key: $(field good ops) writes clean"
wait "$stale"
rc=$?
ae=$(field stale access_errors)
if [ "$rc" -eq 0 ] || [ "${ae:-0}" -lt 3 ]; then
	echo "FAIL: $MODE: the stale client should fail with remote access errors (rc=$rc, access_errors=${ae:-none})"
	cat "$work/stale"
	fail=1
else
	echo "ok: $MODE: the stale client failed cleanly: $ae remote access errors, $(field stale errors) requests failed"
fi
if ! server_stats >"$work/stats"; then
	echo "FAIL: $MODE: the server does not answer after the stale client"
	fail=1
fi

out=$(timeout 60 "$SR" explain 2>&1)
spid_real=$(cat "$work/pid")
echo "$out" | grep -A8 "^diagnosis:"
expect() {
	if grep -Eq -- "$2" <<<"$out"; then
		echo "ok: $MODE: explain: $1"
	else
		echo "FAIL: $MODE: explain: $1 (want /$2/)"
		fail=1
	fi
}
expect "names the client, the key and the server" \
	"^diagnosis: stale rkey: pid [0-9]+ \(blockstore\) softrnic0 keeps using rkey 0x[0-9a-f]+ after pid $spid_real \(blockstore\) softrnic0 deregistered it"
expect "the QPs" "[0-9]+ RDMA operations failed with REM_ACCESS_ERR on [0-9]+ QPs? \(0x[0-9a-f]{6}"
expect "the revoked region" "rkey 0x[0-9a-f]+ was the region va 0x[0-9a-f]+ len [0-9]+ (MiB|KiB|bytes) of pid $spid_real .*deregistered \(revoked\)"
expect "the key to use now" "pid $spid_real \(blockstore\) softrnic0 now offers rkey 0x[0-9a-f]+"
expect "the responder's side" "the responder refused it [0-9]+ times?: (stale|no such) key"
expect "what to do" "what to do: an rkey dies with its region"
if grep -q "^diagnosis:.*pid $good " <<<"$out"; then
	echo "FAIL: $MODE: explain blames the correct client"
	fail=1
fi
kill -TERM "$spid"
wait "$spid"
spid=
exit $fail
