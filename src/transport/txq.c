/*
 * txq.c - batching transmission (see txq.h).
 *
 * Runs of packets to the same destination with the same length go out as
 * one UDP GSO send (UDP_SEGMENT): the kernel cuts the gathered buffer into
 * datagrams of that length, each a complete RoCEv2 packet.  Linux gives
 * segment k of such a send IPv4 ID k (segment 0 gets 0, as a plain send
 * does: link/udp.h), so segment k's ICRC is computed with ID k; receivers
 * that assume ID 0 find k by trying the next ID first (rx.c) or solving.
 * Runs and single packets of a burst leave together in one sendmmsg.
 *
 * Packets to a same-host peer with an inbox (link/shm.h) do not wait
 * here: they are copied into its ring at once, while the payload's
 * memory region is certainly registered, and published when the burst
 * ends.  A full ring refuses the packet (-EAGAIN) and its sender defers.
 */
#include "transport/txq.h"

#include <errno.h>
#include <string.h>

#include "core/nic.h"
#include "link/gso.h"
#include "link/pcap.h"
#include "link/udp.h"
#include "wire/opcode.h"

/* SOFTRNIC_PCAP on a same-host ring: record the packet as the UDP link
 * would carry it, its ICRC computed for the record alone.  v[n-1] is the
 * pad + ICRC piece. */
static void shm_trace(struct srn_nic *nic, const struct srn_shm_peer *sp,
		      const struct srn_ip_meta *meta, struct iovec *v, int n, uint32_t pad)
{
	uint8_t tail[3 + SRN_ICRC_LEN] = { 0 };
	v[n - 1] = (struct iovec){ tail, pad };
	srn_icrc_put(tail + pad, srn_icrc_calc(meta, v, n));
	v[n - 1].iov_len = pad + SRN_ICRC_LEN;
	srn_pcap_record(nic->link.udp.pcap, (const struct sockaddr *)&nic->link.udp.local,
			(const struct sockaddr *)&sp->addr, v, n, false, srn_now_ns());
}

/* Into a same-host ring: no ICRC (its 4 bytes are there, zero). */
static int shm_add(struct srn_nic *nic, struct srn_shm_peer *sp, const struct srn_ip_meta *meta,
		   const uint8_t *hdr, int hl, const struct iovec *pay, int npay, uint32_t paylen)
{
	static const uint8_t zeros[3 + SRN_ICRC_LEN];
	struct iovec v[SRN_MAX_SGE + 2];
	int n = 0;
	v[n++] = (struct iovec){ (void *)hdr, (size_t)hl };
	for (int i = 0; i < npay; i++)
		if (pay[i].iov_len)
			v[n++] = pay[i];
	uint32_t tail = srn_pad_of(paylen) + SRN_ICRC_LEN;
	v[n++] = (struct iovec){ (void *)zeros, tail };
	uint32_t len = (uint32_t)hl + paylen + tail;
	int r = srn_shm_put(&nic->link.shm, sp, v, n, len);
	if (r == -EAGAIN) {
		srn_count(nic->diag.cnt, SRN_CNT_SHM_RING_FULL, 1);
		return r;
	}
	if (r)
		return r;
	srn_count(nic->diag.cnt, SRN_CNT_SENT_PKTS, 1);
	srn_count(nic->diag.cnt, SRN_CNT_SENT_BYTES, len);
	srn_count(nic->diag.cnt, SRN_CNT_SHM_SENT_PKTS, 1);
	if (nic->link.udp.pcap)
		shm_trace(nic, sp, meta, v, n, srn_pad_of(paylen));
	return 0;
}

int srn_txq_add(struct srn_nic *nic, const struct sockaddr *dst, socklen_t dstlen,
		const struct srn_ip_meta *meta, const uint8_t *hdr, int hl,
		const struct iovec *pay, int npay, uint32_t paylen)
{
	struct srn_txq *q = nic->link.txq;
	if (npay > SRN_MAX_SGE || hl > SRN_MAX_HDR_LEN)
		return -EINVAL;
	if (nic->link.shm.enabled) {
		struct srn_shm_peer *sp = srn_shm_route(&nic->link.shm, dst, dstlen);
		if (sp && sp->fresh) {
			/* Packets queued for UDP before the ring was found go
			 * first, or the peer would see them out of order. */
			sp->fresh = false;
			if (q->n)
				srn_txq_flush(nic);
		}
		int r = sp ? shm_add(nic, sp, meta, hdr, hl, pay, npay, paylen) : -EPIPE;
		if (r != -EPIPE)
			return r;
		/* No ring (or its owner died): the socket. */
	}
	if (q->n == SRN_TXQ_PKTS || q->niov + npay + 2 > SRN_TXQ_IOVS)
		srn_txq_flush(nic);
	struct srn_txq_pkt *k = &q->pkt[q->n++];
	k->dst = dst;
	k->dstlen = dstlen;
	k->meta = meta;
	memcpy(k->hdr, hdr, (size_t)hl);
	k->pad = srn_pad_of(paylen);
	memset(k->tail, 0, sizeof(k->tail));
	k->iov_first = (uint16_t)q->niov;
	q->iov[q->niov++] = (struct iovec){ k->hdr, (size_t)hl };
	for (int i = 0; i < npay; i++)
		if (pay[i].iov_len)
			q->iov[q->niov++] = pay[i];
	q->iov[q->niov++] = (struct iovec){ k->tail, (size_t)k->pad + SRN_ICRC_LEN };
	k->niov = (uint16_t)(q->niov - k->iov_first);
	k->len = (uint32_t)hl + paylen + k->pad + SRN_ICRC_LEN;
	return 0;
}

/* ICRC of a queued packet as it will leave with IPv4 ID `id`. */
static void seal(struct srn_txq *q, struct srn_txq_pkt *k, uint16_t id)
{
	struct srn_ip_meta m = *k->meta;
	m.ipv4_id = id;
	struct iovec *iov = &q->iov[k->iov_first];
	/* The last iov is pad + ICRC: checksum the pad only. */
	size_t tail_len = iov[k->niov - 1].iov_len;
	iov[k->niov - 1].iov_len = k->pad;
	uint32_t crc = srn_icrc_calc(&m, iov, k->niov);
	iov[k->niov - 1].iov_len = tail_len;
	srn_icrc_put(k->tail + k->pad, crc);
}

static bool same_dst(const struct srn_txq_pkt *a, const struct srn_txq_pkt *b)
{
	return a->dstlen == b->dstlen && memcmp(a->dst, b->dst, a->dstlen) == 0;
}

/* A same-host receiver is about to sleep in epoll on its socket: an
 * empty datagram wakes it (its receive path ignores it). */
static void doorbell(void *ctx, const struct sockaddr *dst, socklen_t len)
{
	struct srn_nic *nic = ctx;
	srn_count(nic->diag.cnt, SRN_CNT_SHM_DOORBELLS, 1);
	int r = srn_udp_doorbell(&nic->link.udp, dst, len);
	if (r && r != -EAGAIN)      /* a full socket wakes its reader anyway */
		srn_count(nic->diag.cnt, SRN_CNT_TX_ERR, 1);
}

/* Messages for the queued packets from `i` on: each a GSO run (the
 * longest run of equal-length packets to one peer that one send may
 * carry: 64 segments, 65 000 bytes, UIO_MAXIOV pieces) or a single packet,
 * ICRCs sealed.  Returns how many, and in npkts[] how many packets each
 * carries. */
static int plan(struct srn_nic *nic, int i, struct srn_tx_msg *m, int *npkts)
{
	struct srn_txq *q = nic->link.txq;
	int nm = 0;
	while (i < q->n && nm < SRN_TX_BATCH) {
		struct srn_txq_pkt *k = &q->pkt[i];
		int run = 1;
		uint32_t total = k->len, niov = k->niov;
		while (nic->link.gso_ok && i + run < q->n && run < SRN_GSO_MAX_SEGS &&
		       q->pkt[i + run].len == k->len && same_dst(k, &q->pkt[i + run]) &&
		       total + k->len <= SRN_GSO_MAX_BYTES &&
		       niov + q->pkt[i + run].niov <= SRN_GSO_MAX_IOVS) {
			total += k->len;
			niov += q->pkt[i + run].niov;
			run++;
		}
		for (int s = 0; s < run; s++)
			seal(q, &q->pkt[i + s], (uint16_t)s);
		m[nm] = (struct srn_tx_msg){ k->dst, k->dstlen, &q->iov[k->iov_first], (int)niov,
					     run > 1 ? (uint16_t)k->len : 0 };
		npkts[nm++] = run;
		i += run;
	}
	return nm;
}

static void count_sent(struct srn_nic *nic, int first, int n)
{
	uint64_t bytes = 0;
	for (int s = first; s < first + n; s++)
		bytes += nic->link.txq->pkt[s].len;
	srn_count(nic->diag.cnt, SRN_CNT_SENT_PKTS, (uint64_t)n);
	srn_count(nic->diag.cnt, SRN_CNT_SENT_BYTES, bytes);
}

/* The kernel would not take a GSO run: no GSO on this path (an IPsec
 * route, a device without checksum offload, ...). */
static bool gso_refused(const struct srn_tx_msg *m, int r)
{
	return m->gso_seg && (r == -EOPNOTSUPP || r == -EINVAL || r == -EIO || r == -EMSGSIZE);
}

void srn_txq_flush(struct srn_nic *nic)
{
	struct srn_txq *q = nic->link.txq;
	int i = 0;
	while (i < q->n) {
		/* One sendmmsg for the whole burst: the first packet of a
		 * Write (it carries the RETH) cannot join the GSO run of the
		 * packets after it, but it can share their system call. */
		struct srn_tx_msg m[SRN_TX_BATCH];
		int npkts[SRN_TX_BATCH];
		int nm = plan(nic, i, m, npkts), k = 0;
		while (k < nm) {
			int r = srn_udp_send_batch(&nic->link.udp, m + k, nm - k);
			if (r > 0) {
				/* sendmmsg stops at a message that fails and keeps
				 * its error to itself: ask again for the rest, so a
				 * refusal comes back as an error (a full buffer as 0). */
				for (int j = k; j < k + r; j++) {
					count_sent(nic, i, npkts[j]);
					i += npkts[j];
				}
				k += r;
			} else if (r == 0) {
				/* Socket buffer full: these are lost, as on a wire
				 * (RC resends them). */
				for (; k < nm; k++) {
					srn_count(nic->diag.cnt, SRN_CNT_TX_EAGAIN, (uint64_t)npkts[k]);
					i += npkts[k];
				}
			} else if (gso_refused(&m[k], r)) {
				/* Plain sends from now on, these packets too: the
				 * outer loop plans again from packet i. */
				nic->link.gso_ok = false;
				srn_diag_dev_log(nic->diag.seg, SRN_LOG_WARN,
						 "the path refused a UDP GSO send (%s): one datagram "
						 "per packet from now on", strerror(-r));
				break;
			} else {
				/* This message failed: drop it, as the wire would,
				 * and go on with the others. */
				srn_count(nic->diag.cnt, SRN_CNT_TX_ERR, (uint64_t)npkts[k]);
				i += npkts[k++];
			}
		}
	}
	q->n = 0;
	q->niov = 0;
	srn_shm_publish(&nic->link.shm, doorbell, nic);
}
