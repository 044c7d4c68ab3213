/*
 * held.c - REQs that found no listener, held a moment before the REJ.
 *
 * The kernel's CM answers a REQ for a service ID nobody listens on with a
 * REJ at once.  Programs that agree out of band to connect and then race
 * their own listen (perftest -R: the server calls rdma_listen after the
 * handshake that lets the client connect) win that race on kernel stacks
 * because the client's address and route resolution take a few hundred
 * microseconds; ours take none, the REQ arrives first, and Debian's
 * perftest crashes in its retry path.  So a REQ without a listener waits
 * up to SRN_CM_HOLD_MS: an rdma_listen in that time takes it as if it had
 * just arrived, otherwise it gets its REJ (invalid service ID) late.  The
 * requester waits 2 × 268 ms + 4.3 s (its CM response timeout) for an
 * answer, so a REJ one second late is still an answer in time.
 *
 * Behind a shared address (link/udp_group.h) the REQ reached whichever
 * process the link picked, because nobody listened anywhere yet, and the
 * listener may come in another process.  So every SRN_CM_LOOK_MS a held
 * REQ looks at the port files; once another process holds its port, the
 * link passes the packet it kept there (softrnic_gsi_reroute) and we
 * forget the REQ.
 *
 * At most SRN_CM_NHELD REQs wait; beyond that the REJ goes out at once.
 * A retransmitted REQ replaces the held one.  Must hold srn_cm.lock.
 */
#include "cm/held.h"
#include "cm/conn.h"
#include "cm/ports.h"
#include "cm/qp1.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define SRN_CM_NHELD 32
#define SRN_CM_HOLD_MS 1000
#define SRN_CM_LOOK_MS 5

/* libibverbs.so.1's private entry point (src/verbs/verbs_gsi.c). */
int softrnic_gsi_reroute(struct ibv_context *ctx, const uint8_t sgid[16], uint32_t comm_id, long pid);

struct held_req {
	bool used;
	struct srn_cm_dev *dev;
	uint8_t gid[16];
	uint64_t deadline_ns;
	uint64_t look_ns;              /* the next look at the port files */
	struct srn_cm_msg m;
};

static struct held_req held[SRN_CM_NHELD];

void srn_cm_held_add(struct srn_cm_dev *dev, const struct srn_cm_msg *m, const uint8_t gid[16])
{
	struct held_req *free_slot = NULL;
	for (int i = 0; i < SRN_CM_NHELD; i++) {
		struct held_req *h = &held[i];
		if (!h->used) {
			if (!free_slot)
				free_slot = h;
			continue;
		}
		if (h->dev == dev && memcmp(h->gid, gid, 16) == 0 &&
		    h->m.req.local_comm_id == m->req.local_comm_id) {
			h->m = *m;     /* the peer sent it again: keep the first deadline */
			return;
		}
	}
	if (!free_slot) {
		srn_cm_rej_req(dev, gid, m, SRN_CM_REJ_INVALID_SERVICE_ID);
		return;
	}
	free_slot->used = true;
	free_slot->dev = dev;
	memcpy(free_slot->gid, gid, 16);
	free_slot->m = *m;
	free_slot->deadline_ns = srn_now_ns() + (uint64_t)SRN_CM_HOLD_MS * 1000000;
	free_slot->look_ns = 0;        /* at once: the listener may be there already */
	srn_cm.cnt[SRN_CM_CNT_REQ_HELD]++;
	srn_cm_kick();                 /* the CM thread sleeps until the earliest deadline */
}

void srn_cm_held_replay(void)
{
	for (int i = 0; i < SRN_CM_NHELD; i++) {
		struct held_req *h = &held[i];
		if (!h->used)
			continue;
		h->used = false;
		if (srn_cm_req_in(h->dev, &h->m, h->gid) == -ENOENT)
			h->used = true;    /* a listener, but not for this one */
	}
}

/* Does another process hold h's port now?  Then the link passes the
 * REQ there: true, and h is done. */
static bool gone_elsewhere(struct held_req *h)
{
	const struct srn_cm_req *r = &h->m.req;
	long pid = srn_cm_port_holder_sid(r->service_id, r->pdata, sizeof(r->pdata));
	if (pid <= 0 || pid == (long)getpid() ||
	    softrnic_gsi_reroute(h->dev->ctx, h->gid, r->local_comm_id, pid))
		return false;
	srn_cm.cnt[SRN_CM_CNT_REQ_REROUTED]++;
	return true;
}

uint64_t srn_cm_held_expire(uint64_t now)
{
	uint64_t next = 0;
	for (int i = 0; i < SRN_CM_NHELD; i++) {
		struct held_req *h = &held[i];
		if (!h->used)
			continue;
		if (h->look_ns <= now || h->deadline_ns <= now) {
			if (gone_elsewhere(h)) {
				h->used = false;
				continue;
			}
			h->look_ns = now + (uint64_t)SRN_CM_LOOK_MS * 1000000;
		}
		if (h->deadline_ns <= now) {
			h->used = false;
			srn_cm_rej_req(h->dev, h->gid, &h->m, SRN_CM_REJ_INVALID_SERVICE_ID);
			continue;
		}
		uint64_t t = h->look_ns < h->deadline_ns ? h->look_ns : h->deadline_ns;
		if (!next || t < next)
			next = t;
	}
	return next;
}
