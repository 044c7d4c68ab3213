/*
 * egress.c - how a packet leaves the device (see egress.h).
 *
 * Packets to a same-host peer with an inbox (link/shm.h) do not wait:
 * they are copied into its ring at once, while the payload's memory
 * region is certainly registered, and published when the burst ends.  A
 * full ring refuses the packet (-EAGAIN) and its sender defers.
 *
 * The others wait in the queue for the socket.  Runs of packets to the
 * same destination with the same length go out as one UDP GSO send
 * (UDP_SEGMENT): the kernel cuts the gathered buffer into datagrams of
 * that length, each a complete RoCEv2 packet.  Linux gives segment k of
 * such a send IPv4 ID k (segment 0 gets 0, as a plain send does:
 * link/udp.h), so segment k's ICRC is computed with ID k; receivers that
 * assume ID 0 find k by trying the next ID first (transport/rx.c) or
 * solving.  Runs and single packets of a burst leave together in one
 * sendmmsg.
 */
#include "link/egress.h"
#include "link/shm_bell.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "diag/memcheck.h"
#include "link/gso.h"
#include "link/udp_group.h"
#include "wire/gsi_route.h"
#include "wire/opcode.h"

struct srn_egress *srn_egress_create(struct srn_udp *udp, struct srn_shm *shm,
				     struct srn_counters *cnt, bool gso)
{
	struct srn_egress *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->udp = udp;
	e->shm = shm;
	e->cnt = cnt;
	e->gso_ok = gso;
	return e;
}

void srn_egress_destroy(struct srn_egress *e)
{
	free(e);
}

/* Into a same-host ring: no ICRC (its 4 bytes are there, zero). */
static int shm_add(struct srn_egress *e, struct srn_shm_peer *sp, const struct srn_ip_meta *meta,
		   const uint8_t *hdr, int hl, const struct iovec *pay, int npay, uint32_t paylen)
{
	static const uint8_t zeros[3 + SRN_ICRC_LEN];
	struct iovec v[SRN_EGRESS_MAX_PAY + 2];
	int n = 0;
	v[n++] = (struct iovec){ (void *)hdr, (size_t)hl };
	for (int i = 0; i < npay; i++)
		if (pay[i].iov_len)
			v[n++] = pay[i];
	uint32_t tail = srn_pad_of(paylen) + SRN_ICRC_LEN;
	v[n++] = (struct iovec){ (void *)zeros, tail };
	uint32_t len = (uint32_t)hl + paylen + tail;
	int r = srn_shm_put(e->shm, sp, v, n, len, e->udp->tos);
	if (r == -EAGAIN) {
		srn_count(e->cnt, SRN_CNT_SHM_RING_FULL, 1);
		return r;
	}
	if (r)
		return r;
	srn_count(e->cnt, SRN_CNT_SENT_PKTS, 1);
	srn_count(e->cnt, SRN_CNT_SENT_BYTES, len);
	srn_count(e->cnt, SRN_CNT_SHM_SENT_PKTS, 1);
	/* SOFTRNIC_PCAP: as the UDP link would carry it (v[n-1], the
	 * zeros, becomes the record's pad and ICRC). */
	if (e->udp->pcap)
		srn_udp_trace_synth(e->udp, (const struct sockaddr *)&sp->addr, meta, false, v, n,
				    srn_pad_of(paylen), e->udp->tos);
	return 0;
}

int srn_egress_add(struct srn_egress *e, const struct sockaddr *dst, socklen_t dstlen,
		   const struct srn_ip_meta *meta, const uint8_t *hdr, int hl,
		   const struct iovec *pay, int npay, uint32_t paylen)
{
	if (npay > SRN_EGRESS_MAX_PAY || hl > SRN_MAX_HDR_LEN)
		return -EINVAL;
	/* The headers are ours, every byte: memcheck says so here if one is
	 * not.  The payload is the program's memory, read from here on as
	 * a NIC's DMA reads it, unjudged (diag/memcheck.h). */
	SRN_MEM_CHECK_DEFINED(hdr, hl);
	uint32_t dqpn = hl >= 8 ? (uint32_t)hdr[5] << 16 | hdr[6] << 8 | hdr[7] : 0;
	/* QP1's MADs take the socket: behind a shared address the receiving
	 * group routes each to the CM it is for (udp_group.h), which a ring,
	 * chosen by QPN alone, cannot.  They are few: connection setup. */
	if (e->shm->enabled && dqpn != SRN_GSI_QPN) {
		/* Which process behind dst: its QPN says (BTH bytes 5..7). */
		struct srn_shm_peer *sp = srn_shm_route(e->shm, dst, dstlen, srn_qpn_member(dqpn));
		if (sp && sp->fresh) {
			/* Packets queued for UDP before the ring was found go
			 * first, or the peer would see them out of order. */
			sp->fresh = false;
			if (e->n)
				srn_egress_flush(e);
		}
		int r = sp ? shm_add(e, sp, meta, hdr, hl, pay, npay, paylen) : -EPIPE;
		if (r != -EPIPE)
			return r;
		/* No ring (or its owner died): the socket. */
	}
	if (srn_pause_hold(&e->pause, e->cnt))
		return -EAGAIN;	/* the switch paused our link: the sender defers */
	if (e->n == SRN_EGRESS_PKTS || e->niov + npay + 2 > SRN_EGRESS_IOVS)
		srn_egress_flush(e);
	struct srn_egress_pkt *k = &e->pkt[e->n++];
	k->dst = dst;
	k->dstlen = dstlen;
	k->meta = meta;
	memcpy(k->hdr, hdr, (size_t)hl);
	k->pad = srn_pad_of(paylen);
	memset(k->tail, 0, sizeof(k->tail));
	k->iov_first = (uint16_t)e->niov;
	e->iov[e->niov++] = (struct iovec){ k->hdr, (size_t)hl };
	for (int i = 0; i < npay; i++)
		if (pay[i].iov_len)
			e->iov[e->niov++] = pay[i];
	e->iov[e->niov++] = (struct iovec){ k->tail, (size_t)k->pad + SRN_ICRC_LEN };
	k->niov = (uint16_t)(e->niov - k->iov_first);
	k->len = (uint32_t)hl + paylen + k->pad + SRN_ICRC_LEN;
	return 0;
}

/* ICRC of a queued packet as it will leave with IPv4 ID `id`. */
static void seal(struct srn_egress *e, struct srn_egress_pkt *k, uint16_t id)
{
	struct srn_ip_meta m = *k->meta;
	m.ipv4_id = id;
	struct iovec *iov = &e->iov[k->iov_first];
	/* The last iov is pad + ICRC: checksum the pad only. */
	size_t tail_len = iov[k->niov - 1].iov_len;
	iov[k->niov - 1].iov_len = k->pad;
	uint32_t crc = srn_icrc_calc(&m, iov, k->niov);
	iov[k->niov - 1].iov_len = tail_len;
	srn_icrc_put(k->tail + k->pad, crc);
}

/* One GSO run is one send from one socket to one peer: same destination,
 * same source port (link/udp_ports.h). */
static bool same_dst(const struct srn_egress_pkt *a, const struct srn_egress_pkt *b)
{
	return a->dstlen == b->dstlen && a->meta->sport == b->meta->sport &&
	       memcmp(a->dst, b->dst, a->dstlen) == 0;
}

/* A same-host receiver is about to sleep on its socket and its bell:
 * write the bell, else an empty datagram wakes it (its receive path
 * ignores it). */
static void doorbell(void *ctx, const struct sockaddr *dst, socklen_t len, unsigned member,
		     int bell)
{
	struct srn_egress *e = ctx;
	srn_count(e->cnt, SRN_CNT_SHM_DOORBELLS, 1);
	if (bell >= 0 && srn_shm_bell_ring(bell)) {
		srn_count(e->cnt, SRN_CNT_SHM_BELLS_EVENTFD, 1);
		return;
	}
	int r = srn_udp_doorbell(e->udp, dst, len, member);
	if (r && r != -EAGAIN)      /* a full socket wakes its reader anyway */
		srn_count(e->cnt, SRN_CNT_TX_ERR, 1);
}

/* Messages for the queued packets from `i` on: each a GSO run (the
 * longest run of equal-length packets to one peer that one send may
 * carry: 64 segments, 65 000 bytes, UIO_MAXIOV pieces) or a single packet,
 * ICRCs sealed.  Returns how many, and in npkts[] how many packets each
 * carries. */
static int plan(struct srn_egress *e, int i, struct srn_tx_msg *m, int *npkts)
{
	int nm = 0;
	while (i < e->n && nm < SRN_TX_BATCH) {
		struct srn_egress_pkt *k = &e->pkt[i];
		int run = 1;
		uint32_t total = k->len, niov = k->niov;
		while (e->gso_ok && i + run < e->n && run < SRN_GSO_MAX_SEGS &&
		       e->pkt[i + run].len == k->len && same_dst(k, &e->pkt[i + run]) &&
		       total + k->len <= SRN_GSO_MAX_BYTES &&
		       niov + e->pkt[i + run].niov <= SRN_GSO_MAX_IOVS) {
			total += k->len;
			niov += e->pkt[i + run].niov;
			run++;
		}
		/* A shorter packet to the same peer may end the run: UDP GSO
		 * cuts the buffer into gso_size pieces and the last may be
		 * short (GRO hands it back the same way, link/gso.c).  A
		 * Write's last packets and the Send that follows it in the
		 * same post (the block store's write: Write FIRST, MIDDLE..,
		 * LAST, then a 64-byte Send) then leave as two datagrams
		 * instead of three.  Only after a run of two or more: a
		 * single packet followed by a shorter one (a ping-pong's
		 * answer and an ACK) stays two datagrams, so the first is not
		 * held back until the second is through the stack. */
		if (run > 1 && i + run < e->n && e->pkt[i + run].len < k->len &&
		    same_dst(k, &e->pkt[i + run]) && total + e->pkt[i + run].len <= SRN_GSO_MAX_BYTES &&
		    niov + e->pkt[i + run].niov <= SRN_GSO_MAX_IOVS && run < SRN_GSO_MAX_SEGS) {
			total += e->pkt[i + run].len;
			niov += e->pkt[i + run].niov;
			run++;
		}
		for (int s = 0; s < run; s++)
			seal(e, &e->pkt[i + s], (uint16_t)s);
		m[nm] = (struct srn_tx_msg){ k->dst, k->dstlen, &e->iov[k->iov_first], (int)niov,
					     run > 1 ? (uint16_t)k->len : 0, k->meta->sport };
		npkts[nm++] = run;
		i += run;
	}
	return nm;
}

static void count_sent(struct srn_egress *e, int first, int n)
{
	uint64_t bytes = 0;
	for (int s = first; s < first + n; s++)
		bytes += e->pkt[s].len;
	srn_count(e->cnt, SRN_CNT_SENT_PKTS, (uint64_t)n);
	srn_count(e->cnt, SRN_CNT_SENT_BYTES, bytes);
}

/* The kernel would not take a GSO run: no GSO on this path (an IPsec
 * route, a device without checksum offload, ...). */
static bool gso_refused(const struct srn_tx_msg *m, int r)
{
	return m->gso_seg && (r == -EOPNOTSUPP || r == -EINVAL || r == -EIO || r == -EMSGSIZE);
}

void srn_egress_flush(struct srn_egress *e)
{
	int i = 0;
	while (i < e->n) {
		/* One sendmmsg for the whole burst: the first packet of a
		 * Write (it carries the RETH) cannot join the GSO run of the
		 * packets after it, but it can share their system call. */
		struct srn_tx_msg m[SRN_TX_BATCH];
		int npkts[SRN_TX_BATCH];
		int nm = plan(e, i, m, npkts), k = 0;
		while (k < nm) {
			int r = srn_udp_send_batch(e->udp, m + k, nm - k);
			if (r > 0) {
				/* sendmmsg stops at a message that fails and keeps
				 * its error to itself: ask again for the rest, so a
				 * refusal comes back as an error (a full buffer as 0). */
				for (int j = k; j < k + r; j++) {
					count_sent(e, i, npkts[j]);
					i += npkts[j];
				}
				k += r;
			} else if (r == 0) {
				/* Socket buffer full: these are lost, as on a wire
				 * (RC resends them). */
				for (; k < nm; k++) {
					srn_count(e->cnt, SRN_CNT_TX_EAGAIN, (uint64_t)npkts[k]);
					i += npkts[k];
				}
			} else if (gso_refused(&m[k], r)) {
				/* Plain sends from now on, these packets too: the
				 * outer loop plans again from packet i. */
				e->gso_ok = false;
				e->gso_refused = r;
				break;
			} else {
				/* This message failed: drop it, as the wire would,
				 * and go on with the others. */
				srn_count(e->cnt, SRN_CNT_TX_ERR, (uint64_t)npkts[k]);
				i += npkts[k++];
			}
		}
	}
	e->n = 0;
	e->niov = 0;
	srn_shm_publish(e->shm, doorbell, e);
}
