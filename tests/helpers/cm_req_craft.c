/*
 * cm_req_craft.c - CM REQs as a remote attacker writes them (see
 * cm_req_craft.h).
 */
#include "cm_req_craft.h"

#include <string.h>
#include <sys/uio.h>

#include "wire/icrc.h"
#include "wire/opcode.h"
#include "wire/roce_hdr.h"

static struct srn_ip_meta meta_of(const struct sockaddr_in *src, const struct sockaddr_in *dst)
{
	struct srn_ip_meta m = { .family = AF_INET, .sport = ntohs(src->sin_port),
				 .dport = ntohs(dst->sin_port), .ipv4_id = 0,
				 .ipv4_frag = SRN_IPV4_DF };
	memcpy(m.src, &src->sin_addr, 4);
	memcpy(m.dst, &dst->sin_addr, 4);
	return m;
}

void craft_icrc(uint8_t *pkt, size_t len, const struct sockaddr_in *src,
		const struct sockaddr_in *dst)
{
	struct srn_ip_meta m = meta_of(src, dst);
	struct iovec v = { pkt, len - SRN_ICRC_LEN };
	srn_icrc_put(pkt + len - SRN_ICRC_LEN, srn_icrc_calc(&m, &v, 1));
}

int craft_req(uint8_t out[CRAFT_PKT_LEN], const struct sockaddr_in *src,
	      const struct sockaddr_in *dst, const struct sockaddr_in *cm_dst, uint16_t port,
	      uint32_t comm_id, uint64_t tid)
{
	/* As librdmacm's REQ would be: RC, MTU 1024, the IP CM header
	 * saying who connects to whom (Annex A11). */
	struct srn_cm_msg m = { .attr = SRN_CM_ATTR_REQ, .tid = tid };
	struct srn_cm_req *r = &m.req;
	r->local_comm_id = comm_id;
	r->service_id = srn_cma_service_id(0x0106, port);    /* RDMA_PS_TCP */
	r->qpn = comm_id & 0xffffff;
	r->psn = (comm_id * 2654435761u) & 0xffffff;
	r->resp_res = r->init_depth = 1;
	r->remote_cm_timeout = r->local_cm_timeout = 20;
	r->retry_count = 7;
	r->rnr_retry = 7;
	r->max_cm_retries = 15;
	r->pkey = 0xffff;
	r->mtu = 3;
	r->hop_limit = 64;
	r->ack_timeout = 14;
	r->local_lid = r->remote_lid = 0xffff;
	struct sockaddr_in csrc = *src;
	csrc.sin_port = htons((uint16_t)(40000 + (comm_id & 0x3fff)));
	struct sockaddr_in cdst = cm_dst ? *cm_dst : *dst;
	cdst.sin_port = htons(port);
	if (srn_cma_hdr_build(r->pdata, (struct sockaddr *)&csrc, (struct sockaddr *)&cdst))
		return -1;

	struct srn_pkt p = { .opcode = SRN_OP_UD_SEND_ONLY, .pkey = SRN_DEFAULT_PKEY,
			     .dqpn = SRN_GSI_QPN, .psn = comm_id & 0xffffff,
			     .deth_qkey = SRN_GSI_QKEY, .deth_sqpn = SRN_GSI_QPN,
			     .paylen = SRN_MAD_LEN };
	if (srn_pkt_build_hdr(out, &p) != SRN_GSI_MAD_OFF ||
	    srn_cm_mad_build(&m, out + SRN_GSI_MAD_OFF))
		return -1;
	craft_icrc(out, CRAFT_PKT_LEN, src, dst);
	return 0;
}

void craft_parse_answer(const uint8_t *pkt, size_t len, struct craft_answer *a)
{
	memset(a, 0, sizeof(*a));
	struct srn_pkt p;
	struct srn_cm_msg m;
	if (srn_pkt_parse(pkt, len, &p) || p.opcode != SRN_OP_UD_SEND_ONLY ||
	    p.dqpn != SRN_GSI_QPN || p.paylen != SRN_MAD_LEN ||
	    srn_cm_mad_parse(p.payload, p.paylen, &m))
		return;
	a->attr = m.attr;
	if (m.attr == SRN_CM_ATTR_REJ) {
		a->remote_comm_id = m.rej.remote_comm_id;
		a->reason = m.rej.reason;
	}
}
