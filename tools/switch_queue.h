/*
 * switch_queue.h - the egress queue of `softrnic switch`: a FIFO of whole
 * Ethernet frames drained at a configured link rate, with RED-style ECN
 * marking (Kmin, Kmax, Pmax on the instantaneous queue, as DCQCN's
 * switches do; decided as a frame joins the queue, or with mark_dequeue
 * as it leaves, when the mark reaches the receiver a queue delay sooner), tail drop at the buffer limit, and PFC-style XOFF/XON
 * hysteresis with pause counters.
 *
 * Pure: no sockets, no clock (time passed in), a seeded PRNG.  The I/O
 * loop (cmd_switch.c) feeds frames in and takes them out when due.
 *
 * Invariants: bytes == sum of the queued frames' lengths <= buffer;
 * a frame leaves no earlier than the link is free (next_free_ns), so the
 * long-run departure rate is at most rate_bps; paused is true from a
 * crossing of xoff until the queue falls to xon.
 */
#ifndef SRN_TOOLS_SWITCH_QUEUE_H
#define SRN_TOOLS_SWITCH_QUEUE_H

#include <stdbool.h>
#include <stdint.h>

#define SRN_SWQ_SLOTS	4096u	/* frames a queue can hold, a power of two */

struct srn_swq_cfg {
	uint64_t rate_bps;	/* 0 = as fast as frames come */
	uint32_t buffer;	/* bytes; a frame that would pass it is dropped */
	bool ecn;		/* RED marking on */
	bool mark_dequeue;	/* decide as a frame leaves (its queue then), not as it joins */
	uint32_t kmin, kmax;	/* bytes */
	double pmax;		/* marking probability at kmax, 0..1 */
	bool pfc;		/* XOFF/XON on */
	uint32_t xoff, xon;	/* bytes */
};

struct srn_swq_frame {
	uint8_t *data;		/* owned by the queue while queued */
	uint32_t len;		/* bytes handed to the link (vnet header included) */
	uint32_t wire_len;	/* bytes the rate is charged for */
	uint32_t l3_off;	/* offset of the IP header in data */
	int flow;		/* the caller's flow index, -1 = none */
	bool marked;		/* dequeue: CE set as it left (mark_dequeue) */
};

struct srn_swq {
	struct srn_swq_cfg cfg;
	struct srn_swq_frame ring[SRN_SWQ_SLOTS];
	uint32_t head, tail;	/* free running; tail - head frames queued */
	uint64_t bytes, max_bytes;
	uint64_t next_free_ns;	/* the link is busy sending until then */
	uint64_t rng;
	bool paused;
	uint64_t pause_start_ns;
	/* Counters. */
	uint64_t enqueued, departed, marked, not_ect, dropped;
	uint64_t pauses, paused_ns;
};

enum srn_swq_verdict {
	SRN_SWQ_QUEUED,
	SRN_SWQ_MARKED,		/* queued with CE set */
	SRN_SWQ_DROPPED,	/* tail drop: the caller still owns the data */
};

void srn_swq_init(struct srn_swq *q, const struct srn_swq_cfg *cfg, uint64_t seed);
/* Free what is still queued. */
void srn_swq_fini(struct srn_swq *q);

/* RED marking probability for a queue of q bytes. */
double srn_swq_mark_prob(const struct srn_swq_cfg *cfg, uint64_t q);

/* Offer a frame at now.  On QUEUED or MARKED the queue owns f->data. */
enum srn_swq_verdict srn_swq_enqueue(struct srn_swq *q, const struct srn_swq_frame *f,
				     uint64_t now_ns);
/* The head frame if the link is free at now: true and *f (the caller now
 * owns f->data).  Else false. */
bool srn_swq_dequeue(struct srn_swq *q, uint64_t now_ns, struct srn_swq_frame *f);
/* When the head frame may leave (now or later); UINT64_MAX when empty. */
uint64_t srn_swq_next_ns(const struct srn_swq *q);

/* Update the XOFF/XON state after a change: +1 on entering pause, -1 on
 * leaving it, 0 when nothing changed. */
int srn_swq_pfc_update(struct srn_swq *q, uint64_t now_ns);
/* Pause time including a pause still running at now. */
uint64_t srn_swq_paused_ns(const struct srn_swq *q, uint64_t now_ns);

/* Set CE in the IP header at data + l3_off (IPv4 with its checksum fixed,
 * or IPv6).  1 marked, 0 Not-ECT (left alone), -1 not IP. */
int srn_swq_mark_frame(uint8_t *data, uint32_t len, uint32_t l3_off);

#endif /* SRN_TOOLS_SWITCH_QUEUE_H */
