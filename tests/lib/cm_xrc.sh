# Sourceable bash library for the XRC-through-rdma_cm tests: Debian's
# unmodified rdma_xserver / rdma_xclient with -c x through `softrnic run`
# (tests/lib/cm_pair.sh runs them), and what a kernel CM reads in the trace.
#
#   source "$SRN_SRC/tests/lib/cm_xrc.sh"     # after cm_pair.sh
#   xrc_pair NAME SADDR SPRE CPRE             # sets XRC_PORT; 0 or 1
#   xrc_trace_check PCAP CADDR                # 0 or 1 (skips without tshark)
#
# SPRE/CPRE are the command prefixes of server and client (namespace,
# environment); the server's SPRE should set SOFTRNIC_PCAP when the trace
# is checked.  Up to 3 attempts with fresh ports (a random port may be
# another test's); every run is bounded by cm_pair.sh's timeout.

xrc_pair() {
	local name=$1 saddr=$2 spre=$3 cpre=$4 i p
	for i in 1 2 3; do
		p=$((20000 + RANDOM % 12000))
		if srn_cm_pair "$name (attempt $i)" "$saddr" \
			"$spre" "rdma_xserver -p $p -c x" \
			"$cpre" "rdma_xclient -s $saddr -p $p -c x" \
			"rdma_xserver: end 0" "rdma_xclient: end 0"; then
			srn_cm_fail=0
			XRC_PORT=$p
			return 0
		fi
	done
	return 1
}

# The REQ says XRC (transport service type 3, extended type 1) for
# RDMA_PS_IB's service ID; the REP names the target QP in its EECN with
# SRQ set and local QPN 0; the client's Send has an XRC opcode (0xA4,
# SEND_ONLY) and goes to that target QP.
xrc_trace_check() {
	local pcap=$1 caddr=$2 fail=0 tst ext sid qpn eecn srq send ipf=ip
	case $caddr in *:*) ipf=ipv6 ;; esac
	if ! command -v tshark >/dev/null; then
		echo "note: tshark not installed, trace not checked"
		return 0
	fi
	# Two tshark runs (each costs seconds on a busy machine): the REQ's
	# and the REP's fields, then the client's XRC Send.
	read -r tst ext sid < <(tshark -r "$pcap" -Y infiniband.cm.req -T fields -E separator=' ' \
		-e infiniband.cm.req.transpsvctype -e infiniband.cm.req.ext_transport \
		-e infiniband.cm.req.serviceid 2>/dev/null | head -1)
	read -r qpn eecn srq < <(tshark -r "$pcap" -Y infiniband.cm.rep -T fields -E separator=' ' \
		-e infiniband.cm.rep.localqpn -e infiniband.cm.rep.localeecn -e infiniband.cm.rep.srq \
		2>/dev/null | head -1)
	send=$(tshark -r "$pcap" -Y "$ipf.src==$caddr && infiniband.bth.opcode==0xa4" -T fields \
		-e infiniband.bth.destqp 2>/dev/null | head -1)
	echo "REQ transport $tst ext $ext service $sid; REP qpn $qpn eecn $eecn srq $srq; XRC Send to $send"
	[ -n "$tst" ] && [ -n "$ext" ] && [ "$((tst))" -eq 3 ] && [ "$((ext))" -eq 1 ] ||
		{ echo "FAIL: the REQ must say XRC (3/1)"; fail=1; }
	[ -n "$sid" ] && [ "$((sid))" -eq $((0x13f << 16 | XRC_PORT)) ] ||
		{ echo "FAIL: the service ID must be RDMA_PS_IB's"; fail=1; }
	[ -n "$qpn" ] && [ -n "$srq" ] && [ "$((qpn))" -eq 0 ] && [ "$((srq))" -eq 1 ] ||
		{ echo "FAIL: the REP's local QPN must be 0 and SRQ 1"; fail=1; }
	[ -n "$eecn" ] && [ -n "$send" ] && [ "$((eecn))" -ne 0 ] && [ "$((send))" -eq "$((eecn))" ] ||
		{ echo "FAIL: the XRC Send must go to the QP the REP named in its EECN"; fail=1; }
	[ $fail -eq 0 ] && echo "ok: the trace reads as XRC to a kernel CM"
	return $fail
}
