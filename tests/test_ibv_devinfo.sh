#!/bin/bash
# test_ibv_devinfo.sh - Debian's unmodified ibv_devinfo, run through
# `softrnic run`, sees a working RoCE device:
#   - default device: hca_id softrnic0, transport InfiniBand (0) (RoCE
#     devices report the IB transport), port 1 PORT_ACTIVE (4), link layer
#     Ethernet, max_mtu and active_mtu 4096 (loopback's MTU is 65536), and
#     with -v non-zero limits and a GID[0] that is the IPv4-mapped form of
#     a 127.0.0.N loopback address;
#   - SOFTRNIC_DEVICES names a device srntest on 127.B.C.9 with a 1500-byte
#     link MTU: hca_id srntest, active_mtu 1024 (the largest IB MTU whose
#     packets, with RoCEv2's IP/UDP/BTH/ICRC overhead, fit in 1500).
# ibv_devinfo prints a RoCE v2 GID as "::ffff:a.b.c.d, RoCE v2".
set -u
: "${SRN_BUILD:?SRN_BUILD must point at the build directory}"
SOFTRNIC="$SRN_BUILD/bin/softrnic"

fail() { echo "FAIL: $*"; exit 1; }

command -v ibv_devinfo >/dev/null ||
	{ echo "SKIP: ibv_devinfo not installed (ibverbs-utils)"; exit 77; }
[ -x "$SOFTRNIC" ] || fail "$SOFTRNIC not built"
unset SOFTRNIC_DEVICES SOFTRNIC_PCAP

preload=()
[ -n "${SRN_ASAN_PRELOAD:-}" ] && preload=(LD_PRELOAD="$SRN_ASAN_PRELOAD")

# devinfo ARGS...: ibv_devinfo's stdout in $out; fails the test on rc != 0.
devinfo() {
	out=$(timeout 60 env "${preload[@]}" "$SOFTRNIC" run -- ibv_devinfo "$@")
	local rc=$?
	[ "$rc" -eq 0 ] || { echo "$out"; fail "ibv_devinfo $* exited $rc"; }
}

# expect WHAT REGEX: some line of $out matches the extended regex.
expect() {
	grep -Eq -- "$2" <<<"$out" ||
		{ echo "$out"; fail "ibv_devinfo: no $1 (want /$2/)"; }
}

# Fields shared by both outputs: label, then tabs, then the value.
expect_basics() {
	expect "hca_id $1" "^hca_id:[[:space:]]+$1\$"
	expect "IB transport" "^[[:space:]]+transport:[[:space:]]+InfiniBand \(0\)\$"
	expect "active port" "^[[:space:]]+state:[[:space:]]+PORT_ACTIVE \(4\)\$"
	expect "Ethernet link" "^[[:space:]]+link_layer:[[:space:]]+Ethernet\$"
	expect "max_mtu 4096" "^[[:space:]]+max_mtu:[[:space:]]+4096 \(5\)\$"
	expect "port 1" "^[[:space:]]+port:[[:space:]]+1\$"
	expect "node_guid" "^[[:space:]]+node_guid:[[:space:]]+[0-9a-f]{4}(:[0-9a-f]{4}){3}\$"
	if grep -Eq "node_guid:[[:space:]]+0000:0000:0000:0000\$" <<<"$out"; then
		echo "$out"; fail "node_guid is zero"
	fi
}

# expect_gid0 A.B.C: GID[0] is the RoCEv2 GID of the IPv4 address A.B.C.N
# (the IPv4-mapped IPv6 address ::ffff:A.B.C.N); prints N.  ibv_devinfo
# learns the type from ibv_query_gid_type(); any other type than RoCE v2
# would make it print the GID in hex with ", RoCE v1" or an invalid type.
expect_gid0() {
	local line n
	line=$(grep -E "^[[:space:]]+GID\[ *0\]:" <<<"$out" | head -n 1)
	if ! [[ "$line" =~ ::ffff:${1//./\\.}\.([0-9]+),\ RoCE\ v2$ ]]; then
		echo "$out"
		fail "GID[0] '$line' is not '::ffff:$1.N, RoCE v2'"
	fi
	n=${BASH_REMATCH[1]}
	[ "$n" -ge 1 ] && [ "$n" -le 254 ] || fail "GID[0] host part $n"
	echo "$n"
}

# -- the default device --------------------------------------------------
devinfo
expect_basics softrnic0
expect "active_mtu 4096" "^[[:space:]]+active_mtu:[[:space:]]+4096 \(5\)\$"
echo "ok: ibv_devinfo shows softrnic0, active, Ethernet, MTU 4096"

devinfo -v
expect_basics softrnic0
for limit in max_qp max_qp_wr max_sge max_cq max_cqe max_mr max_pd; do
	expect "non-zero $limit" "^[[:space:]]+$limit:[[:space:]]+[1-9][0-9]*\$"
done
expect "gid table" "^[[:space:]]+gid_tbl_len:[[:space:]]+[1-9][0-9]*\$"
n=$(expect_gid0 127.0.0) || { echo "$n"; exit 1; }
echo "ok: ibv_devinfo -v shows limits and GID[0] = ::ffff:127.0.0.$n"

# -- a configured device -------------------------------------------------
# Not in 127.0.0.0/24: other tests' devices with addr=auto,share=0 take
# 127.0.0.2 and up for themselves alone, and one on .9 failed this run.
net=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1))
export SOFTRNIC_DEVICES="name=srntest,addr=$net.9,port=4791,mtu=1500"
devinfo
expect_basics srntest
expect "active_mtu 1024" "^[[:space:]]+active_mtu:[[:space:]]+1024 \(3\)\$"
devinfo -v
n=$(expect_gid0 "$net") || { echo "$n"; exit 1; }
[ "$n" = 9 ] || fail "srntest's GID[0] is $net.$n, configured $net.9"
echo "ok: SOFTRNIC_DEVICES device srntest on $net.9, active_mtu 1024"

echo "PASS"
exit 0
