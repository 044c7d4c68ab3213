/*
 * rx.c - validation at the door: every received datagram is parsed,
 * its ICRC checked, its destination QP found and its source and state
 * checked before the responder or completer sees it.  Each reject is
 * counted; nothing here trusts a length from the packet that
 * srn_pkt_parse has not bounded.
 */
#include "transport/rx.h"

#include <string.h>
#include <netinet/in.h>

#include "core/mcast.h"
#include "core/nic.h"
#include "core/qp.h"
#include "diag/shm.h"
#include "transport/cc.h"
#include "transport/completer.h"
#include "link/udp_ports.h"
#include "transport/responder.h"
#include "wire/ecn.h"
#include "wire/icrc.h"
#include "wire/roce_hdr.h"

/* IP facts of a received packet for its ICRC.  A user-space socket sees
 * neither the IPv4 ID nor the flags; softrnic peers send ID 0 with DF
 * (link/udp.c), so those are assumed and foreign IDs are solved for. */
/* Which IPv4 ID did the sender's kernel put in?  0 for a single send; k
 * for segment k of a GSO send (link/egress.c).  Try the GRO index first
 * (segments after the first of a bulk transfer: one CRC pass, not two),
 * then 0, then the successor of the last ID that matched, and only then
 * solve. */
static bool icrc_ok(struct srn_nic *nic, const uint8_t *data, uint32_t len,
		    const struct sockaddr *src, const struct sockaddr_storage *local, uint32_t wire,
		    uint16_t id_hint)
{
	struct srn_ip_meta m;
	srn_udp_rx_meta(&nic->link.udp, src, local, &m);
	struct iovec iov = { (void *)data, len - SRN_ICRC_LEN };
	if (m.family != AF_INET)
		return srn_icrc_calc(&m, &iov, 1) == wire;   /* IPv6 has no ID */
	uint16_t guesses[3] = { id_hint, 0, nic->link.rx_id_next };
	for (int g = 0; g < 3; g++) {
		if ((g == 0 && guesses[0] == 0) || (g == 2 && (guesses[2] == 0 ||
							       guesses[2] == guesses[0])))
			continue;   /* 0 is tried once, as the second guess */
		m.ipv4_id = guesses[g];
		if (srn_icrc_calc(&m, &iov, 1) == wire) {
			nic->link.rx_id_next = (uint16_t)(guesses[g] + 1);
			return true;
		}
	}
	m.ipv4_id = 0;
	uint16_t id;
	if (srn_icrc_solve_ipv4_id(&m, &iov, 1, wire, &id) == 0) {
		srn_count(nic->diag.cnt, SRN_CNT_ICRC_ID_SOLVED, 1);
		nic->link.rx_id_next = (uint16_t)(id + 1);
		return true;
	}
	return false;
}

/* RC and UC packets must come from the peer the QP was connected to
 * (rxe check_addr does the same). */
static bool from_peer(const struct srn_qp *qp, const struct sockaddr *src)
{
	if (src->sa_family != qp->path.peer.ss_family)
		return false;
	if (src->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)src, *b = (const void *)&qp->path.peer;
		return a->sin_addr.s_addr == b->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *a = (const void *)src, *b = (const void *)&qp->path.peer;
	return memcmp(&a->sin6_addr, &b->sin6_addr, 16) == 0;
}

static uint16_t port_of(const struct sockaddr *sa)
{
	return ntohs(sa->sa_family == AF_INET ? ((const struct sockaddr_in *)sa)->sin_port
					      : ((const struct sockaddr_in6 *)sa)->sin6_port);
}

/* A CNP slows its QP down, so it must come from the QP's peer: its
 * address, and a UDP source port only the peer (or root) can send from.
 * The RoCEv2 annex (A17.9.3) fixes the CNP's destination port, not its
 * source; hardware sends from port 0 (the ConnectX-4 Lx capture, wire
 * vector E1) or from the flow's port, softrnic from the notifying QP's
 * own port (cc.c).  So the ports taken are:
 *  - 0, which only a raw socket (CAP_NET_RAW) can send from;
 *  - the peer device's port, the destination of our packets, which the
 *    peer holds (bound without SO_REUSEADDR, link/udp.c);
 *  - the port the peer QP's packets come from (path.peer_sport), learned
 *    from packets the transport took in sequence, which a forger would
 *    have to guess PSNs to make; before one came (a UC QP whose peer
 *    never sends), the port rxe's formula gives the peer QP
 *    (link/udp_ports.h), which the peer binds when its QP first sends.
 * Another local user can bind the peer's address (any 127.0.0.x) but
 * none of those ports.  A CNP through a same-host ring is the peer
 * user's own word, as every ring packet is. */
static bool cnp_from_peer(const struct srn_qp *qp, const struct sockaddr *src, bool from_ring)
{
	if (!from_peer(qp, src))
		return false;
	if (from_ring)
		return true;
	uint16_t sp = port_of(src);
	return sp == 0 || sp == port_of((const struct sockaddr *)&qp->path.peer) ||
	       sp == qp->path.peer_sport ||
	       (!qp->path.peer_sport && sp == srn_rxe_src_port(qp->attr.dest_qp_num));
}

/* Parse and check the ICRC: false (counted) if the packet is dropped.
 * local: it came through a same-host ring, which carries no ICRC. */
static bool at_the_door(struct srn_nic *nic, const uint8_t *data, uint32_t len,
			const struct sockaddr *src, const struct sockaddr_storage *local,
			struct srn_pkt *p, uint16_t id_hint, bool from_ring)
{
	srn_count(nic->diag.cnt, SRN_CNT_RCVD_PKTS, 1);
	srn_count(nic->diag.cnt, SRN_CNT_RCVD_BYTES, len);
	if (srn_pkt_parse(data, len, p)) {
		srn_count(nic->diag.cnt, SRN_CNT_MALFORMED, 1);
		return false;
	}
	if (from_ring) {
		srn_count(nic->diag.cnt, SRN_CNT_SHM_RCVD_PKTS, 1);
		return true;
	}
	/* "Data already placed" is a same-host peer's word only: a remote
	 * peer cannot claim bytes it never sent. */
	p->placed = false;
	if (!icrc_ok(nic, data, len, src, local, p->icrc, id_hint)) {
		srn_count(nic->diag.cnt, SRN_CNT_BAD_ICRC, 1);
		return false;
	}
	return true;
}

void srn_rx_mcast_packet(struct srn_nic *nic, const struct srn_mcast_group *g,
			 const uint8_t *data, uint32_t len, const struct sockaddr *src)
{
	struct srn_pkt p;
	if (!at_the_door(nic, data, len, src, &g->sock.local, &p, 0, false))
		return;
	/* Only UD SENDs to the multicast QPN travel to a group (IBTA 10.5). */
	if (srn_opcode_transport(p.opcode) != SRN_TRANSPORT_UD || p.dqpn != SRN_QPN_MULTICAST) {
		srn_count(nic->diag.cnt, SRN_CNT_MALFORMED, 1);
		return;
	}
	for (int i = 0; i < g->nqps; i++) {
		struct srn_qp *qp = g->qps[i];
		if (qp->state == IBV_QPS_RTR || qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD)
			srn_resp_packet(qp, &p, src);
		else
			srn_count(nic->diag.cnt, SRN_CNT_QP_STATE_DROP, 1);
	}
}

static void rx_packet(struct srn_nic *nic, const uint8_t *data, uint32_t len,
		      const struct sockaddr *src, uint16_t id_hint, bool from_ring, uint8_t tos)
{
	struct srn_pkt p;

	if (!at_the_door(nic, data, len, src, &nic->link.udp.local, &p, id_hint, from_ring))
		return;
	if (srn_opcode_transport(p.opcode) == SRN_TRANSPORT_CC) {
		/* A CNP (0x81) is the only packet of this group: the reaction
		 * point takes it, whatever its own ECN bits say. */
		if (p.opcode == SRN_OP_CNP) {
			struct srn_qp *slow = srn_nic_qp_lookup(nic, p.dqpn);
			bool ok = slow && cnp_from_peer(slow, src, from_ring);
			/* From the peer's address, not from its ports: forged. */
			if (slow && !ok && from_peer(slow, src))
				srn_count(nic->diag.cnt, SRN_CNT_RP_CNP_BAD_SOURCE, 1);
			srn_cc_rx_cnp(nic, slow, ok);
		}
		else
			srn_count(nic->diag.cnt, SRN_CNT_MALFORMED, 1);
		return;
	}

	struct srn_qp *qp = srn_nic_qp_lookup(nic, p.dqpn);
	if (!qp) {
		srn_count(nic->diag.cnt, SRN_CNT_UNKNOWN_QP, 1);
		return;
	}
	if (srn_opcode_transport(p.opcode) != srn_qp_transport(qp)) {
		srn_count(nic->diag.cnt, SRN_CNT_MALFORMED, 1);
		return;
	}
	if (qp->type != IBV_QPT_UD && !from_peer(qp, src)) {
		srn_count(nic->diag.cnt, SRN_CNT_ADDR_MISMATCH, 1);
		return;
	}
	/* Requests are taken from RTR on; responses need a requester (RTS,
	 * SQD, SQE).  RESET, INIT and ERR take nothing. */
	bool is_req = p.info->flags & SRN_OPF_REQ;
	enum ibv_qp_state s = qp->state;
	bool accept = is_req ? (s == IBV_QPS_RTR || s == IBV_QPS_RTS || s == IBV_QPS_SQD ||
				s == IBV_QPS_SQE)
			     : (s == IBV_QPS_RTS || s == IBV_QPS_SQD || s == IBV_QPS_SQE);
	if (!accept) {
		srn_count(nic->diag.cnt, SRN_CNT_QP_STATE_DROP, 1);
		return;
	}
	srn_diag_qp_count(qp->diag, SRN_QPC_RCVD_PKTS, 1);
	srn_diag_qp_count(qp->diag, SRN_QPC_RCVD_BYTES, len);
	/* Congestion on the way here: the notification point (cc.c). */
	if (__builtin_expect((tos & SRN_ECN_MASK) == SRN_ECN_CE, 0))
		srn_cc_rx_ce(qp);
	uint64_t va = p.info->flags & SRN_OPF_ATOMIC ? p.atm_va : p.reth_va;
	srn_diag_busy(nic->diag.busy, is_req ? SRN_DIAG_STAGE_RESPONDER : SRN_DIAG_STAGE_COMPLETER,
		      qp->qpn, p.opcode, p.psn, va, p.paylen);
	/* The peer QP's source port, for its CNPs (cnp_from_peer): from a
	 * packet that moved the responder's expected PSN or the completer's
	 * oldest unacknowledged one, so never from a forger's guess. */
	uint32_t epsn = qp->resp.epsn, una = qp->comp.una;
	if (is_req)
		srn_resp_packet(qp, &p, src);
	else
		srn_comp_packet(qp, &p);
	if (!from_ring && (qp->resp.epsn != epsn || qp->comp.una != una)) {
		uint16_t sp = port_of(src);
		if (qp->path.peer_sport != sp)
			qp->path.peer_sport = sp;
	}
}

void srn_rx_packet(struct srn_nic *nic, const uint8_t *data, uint32_t len,
		   const struct sockaddr *src, uint16_t id_hint, uint8_t tos)
{
	if (len == 0)
		return;         /* a same-host peer's doorbell (link/shm.h) */
	rx_packet(nic, data, len, src, id_hint, false, tos);
}

void srn_rx_packet_local(struct srn_nic *nic, const uint8_t *data, uint32_t len,
			 const struct sockaddr *src, uint8_t tos)
{
	rx_packet(nic, data, len, src, 0, true, tos);
}
