#!/bin/bash
# test_tool_devinfo.sh - the `softrnic` tool itself:
#   help/usage:  `help` lists the subcommands, `help run` documents the
#                environment, an unknown subcommand exits 2 with usage,
#                --version prints a version;
#   run:         prepends <build>/lib to LD_LIBRARY_PATH, sets
#                SOFTRNIC_DEVICES / SOFTRNIC_PCAP, passes the program's
#                exit status through, exits 127 for a missing program,
#                126 for a non-executable one, 1 (naming the path searched)
#                when softrnic's libibverbs.so.1 is not next to the binary;
#   devinfo:     shows the same values as Debian's ibv_devinfo (-v) for the
#                fields compared below, plus udp_address A.B.C.D:PORT that
#                agrees with GID[0] and with the configured UDP port.
# All checks run even after one fails, so one run shows every problem.
set -u
: "${SRN_BUILD:?SRN_BUILD must point at the build directory}"
SOFTRNIC="$SRN_BUILD/bin/softrnic"

bad=0
fail() { echo "FAIL: $*"; bad=1; }
ok() { echo "ok: $*"; }

[ -x "$SOFTRNIC" ] || { echo "FAIL: $SOFTRNIC not built"; exit 1; }
unset SOFTRNIC_DEVICES SOFTRNIC_PCAP
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# srn ARGS...: run the tool; stdout in $out, stderr in $err, status in $rc.
srn() {
	out=$(timeout 60 "$SOFTRNIC" "$@" 2>"$tmp/stderr")
	rc=$?
	err=$(cat "$tmp/stderr")
}

# value LABEL TEXT: the value after "LABEL:" and its tabs (first match).
value() {
	awk -F'\t+' -v l="$1:" '$2 == l { print $3; exit }' <<<"$2"
}

# -- help and usage ------------------------------------------------------
srn help
if [ "$rc" -eq 0 ] && grep -q '^  devinfo ' <<<"$out" && grep -q '^  run ' <<<"$out"; then
	ok "help lists devinfo and run"
else
	fail "help: rc $rc, output: $out"
fi

srn help run
for var in SOFTRNIC_DEVICES SOFTRNIC_PCAP LD_LIBRARY_PATH; do
	grep -q "$var" <<<"$out" || fail "help run does not document $var"
done
[ "$rc" -eq 0 ] && ok "help run documents the environment" || fail "help run: rc $rc"

srn no-such-subcommand
if [ "$rc" -eq 2 ] && grep -q 'Usage:' <<<"$err" && grep -q 'no-such-subcommand' <<<"$err"; then
	ok "unknown subcommand exits 2 with usage"
else
	fail "unknown subcommand: rc $rc, stderr: $err"
fi

srn
[ "$rc" -eq 2 ] && ok "no subcommand exits 2" || fail "no subcommand: rc $rc"

srn --version
[[ "$rc" -eq 0 && "$out" =~ ^softrnic\ [0-9]+\.[0-9]+ ]] &&
	ok "--version: $out" || fail "--version: rc $rc, '$out'"

# -- run -----------------------------------------------------------------
# run finds <prefix>/lib from its own resolved path, <prefix>/bin/softrnic.
libdir=$(dirname "$(dirname "$(readlink -f "$SOFTRNIC")")")/lib
show_env='printf "%s|%s|%s" "$LD_LIBRARY_PATH" "${SOFTRNIC_PCAP-unset}" "${SOFTRNIC_DEVICES-unset}"'

out=$(env -u LD_LIBRARY_PATH "$SOFTRNIC" run -- sh -c "$show_env")
[ "$out" = "$libdir|unset|unset" ] && ok "run sets LD_LIBRARY_PATH=$libdir" ||
	fail "run environment: '$out', want '$libdir|unset|unset'"

spec="name=x,addr=127.0.0.11,port=4791,mtu=1500"
out=$(LD_LIBRARY_PATH=/srn/keep "$SOFTRNIC" run --pcap "$tmp/t.pcap" --devices "$spec" -- sh -c "$show_env")
[ "$out" = "$libdir:/srn/keep|$tmp/t.pcap|$spec" ] &&
	ok "run prepends to LD_LIBRARY_PATH, sets SOFTRNIC_PCAP/SOFTRNIC_DEVICES" ||
	fail "run --pcap --devices environment: '$out'"

srn run -- sh -c 'exit 42'
[ "$rc" -eq 42 ] && ok "run passes the exit status through" || fail "run exit status $rc, want 42"

srn run -- "srn-no-such-program-$$"
if [ "$rc" -eq 127 ] && grep -q "srn-no-such-program-$$" <<<"$err"; then
	ok "missing program: 127, '$err'"
else
	fail "missing program: rc $rc, stderr '$err'"
fi

srn run -- "$tmp/no/such/dir/prog"
[ "$rc" -eq 127 ] && ok "missing path: 127" || fail "missing path: rc $rc"

printf '#!/bin/sh\n' >"$tmp/notexec"
srn run -- "$tmp/notexec"
[ "$rc" -eq 126 ] && ok "non-executable program: 126" || fail "non-executable: rc $rc"

srn run
[ "$rc" -eq 2 ] && ok "run without a program: 2" || fail "run without a program: rc $rc"

# A copy of the binary in a prefix with no lib/ must refuse, naming the path.
mkdir -p "$tmp/prefix/bin"
cp "$SOFTRNIC" "$tmp/prefix/bin/softrnic"
out=$(timeout 60 "$tmp/prefix/bin/softrnic" run -- true 2>&1)
rc=$?
if [ "$rc" -eq 1 ] && grep -qF "$tmp/prefix/lib/libibverbs.so.1" <<<"$out"; then
	ok "library missing: exit 1 naming $tmp/prefix/lib/libibverbs.so.1"
else
	fail "library missing: rc $rc, '$out'"
fi

# -- devinfo ---------------------------------------------------------------
srn devinfo --no-such-option
[ "$rc" -eq 2 ] && ok "devinfo bad option: 2" || fail "devinfo bad option: rc $rc"

srn devinfo -d no-such-device
[ "$rc" -eq 1 ] && grep -q no-such-device <<<"$err" && ok "devinfo -d unknown: 1" ||
	fail "devinfo -d no-such-device: rc $rc, '$err'"

srn devinfo -l
[ "$rc" -eq 0 ] && grep -q '^1 HCA found:' <<<"$out" && grep -qP '^\tsoftrnic0$' <<<"$out" &&
	ok "devinfo -l lists softrnic0" || fail "devinfo -l: rc $rc, '$out'"

# check_udp_address TEXT ADDR PORT: GID[0] is ::ffff:ADDR, udp_address ADDR:PORT.
check_udp_address() {
	local gid udp
	gid=$(value "GID[  0]" "$1")
	udp=$(value udp_address "$1")
	[ "$gid" = "::ffff:$2, RoCE v2" ] || fail "devinfo GID[0] '$gid', want ::ffff:$2"
	[ "$udp" = "$2:$3" ] && ok "udp_address $udp" || fail "udp_address '$udp', want $2:$3"
}

srn devinfo
mine=$out
[ "$rc" -eq 0 ] && grep -q "^hca_id:	softrnic0\$" <<<"$mine" && ok "devinfo shows softrnic0" ||
	fail "devinfo: rc $rc, stderr '$err', output '$mine'"

srn devinfo -v
mine_v=$out
[ "$rc" -eq 0 ] || fail "devinfo -v: rc $rc, stderr '$err'"
gid0=$(value "GID[  0]" "$mine_v")
if [[ "$gid0" =~ ^::ffff:(127\.0\.0\.[0-9]+),\ RoCE\ v2$ ]]; then
	check_udp_address "$mine_v" "${BASH_REMATCH[1]}" 4791
else
	fail "devinfo -v GID[0] '$gid0' is not ::ffff:127.0.0.N, RoCE v2"
fi

# Configured addresses outside 127.0.0.0/24, where other tests' devices
# with addr=auto,share=0 take addresses for themselves alone.
net=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1))
srn run --devices "name=srntool,addr=$net.10,port=4792,mtu=1500" -- "$SOFTRNIC" devinfo -v
if [ "$rc" -eq 0 ] && grep -q "^hca_id:	srntool\$" <<<"$out" &&
   [ "$(value active_mtu "$out")" = "1024 (3)" ]; then
	ok "run --devices: devinfo shows srntool with active_mtu 1024"
else
	fail "run --devices ... devinfo -v: rc $rc, '$err', output '$out'"
fi
check_udp_address "$out" "$net.10" 4792

# Same values as Debian's ibv_devinfo, read through the same library.  The
# device is pinned to one address: the default device takes the first free
# 127.0.0.N when it opens, and its GID and GUID follow that address, so two
# processes can see different values while other tests hold addresses.
if command -v ibv_devinfo >/dev/null; then
	export SOFTRNIC_DEVICES="name=softrnic0,addr=$net.12,port=4791"
	srn devinfo
	mine=$out
	srn devinfo -v
	mine_v=$out
	preload=()
	[ -n "${SRN_ASAN_PRELOAD:-}" ] && preload=(LD_PRELOAD="$SRN_ASAN_PRELOAD")
	theirs=$(timeout 60 env "${preload[@]}" "$SOFTRNIC" run -- ibv_devinfo) ||
		fail "ibv_devinfo exited $?"
	theirs_v=$(timeout 60 env "${preload[@]}" "$SOFTRNIC" run -- ibv_devinfo -v) ||
		fail "ibv_devinfo -v exited $?"
	fields="transport fw_ver node_guid sys_image_guid vendor_id vendor_part_id
		hw_ver phys_port_cnt state max_mtu active_mtu sm_lid port_lid
		port_lmc link_layer"
	fields_v="max_mr_size page_size_cap max_qp max_qp_wr device_cap_flags
		max_sge max_sge_rd max_cq max_cqe max_mr max_pd max_qp_rd_atom
		max_res_rd_atom max_qp_init_rd_atom atomic_cap max_mw max_ah
		max_srq max_srq_wr max_srq_sge max_pkeys local_ca_ack_delay
		num_comp_vectors max_msg_sz port_cap_flags max_vl_num pkey_tbl_len
		gid_tbl_len active_width active_speed phys_state"
	same=0
	# Equal, or absent from both (fw_ver is printed only when set).
	for f in $fields; do
		a=$(value "$f" "$mine") b=$(value "$f" "$theirs")
		[ "$a" = "$b" ] && same=$((same + 1)) ||
			fail "$f: softrnic devinfo '$a', ibv_devinfo '$b'"
	done
	for f in $fields_v "GID[  0]"; do
		a=$(value "$f" "$mine_v") b=$(value "$f" "$theirs_v")
		[ "$a" = "$b" ] && same=$((same + 1)) ||
			fail "$f (-v): softrnic devinfo '$a', ibv_devinfo '$b'"
	done
	ok "$same fields agree with ibv_devinfo"
else
	echo "note: ibv_devinfo not installed, comparison skipped"
fi

[ "$bad" -eq 0 ] && { echo PASS; exit 0; }
exit 1
