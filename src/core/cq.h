/*
 * cq.h - completion queues and completion channels.
 *
 * A CQ is a power-of-two ring of struct ibv_wc filled by the transport
 * under nic->lock and drained by ibv_poll_cq.  Arming (ibv_req_notify_cq)
 * makes the next completion (or the next solicited one) queue one event on
 * the CQ's channel.  A channel's fd is an eventfd that is readable while
 * the channel holds events, so poll/epoll/blocking reads all work.
 */
#ifndef SRN_CORE_CQ_H
#define SRN_CORE_CQ_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/async.h"
#include "diag/clock.h"

struct srn_nic;
struct srn_context;

struct srn_channel {
	struct ibv_comp_channel ibch;
	struct srn_context *ctx;
	pthread_mutex_t lock;
	struct srn_cq **events;        /* FIFO of CQs with a pending event (cq.c: tagged) */
	unsigned head, tail, cap;      /* free-running, cap a power of two */
	int ncqs;                      /* CQs bound to this channel */
	int wait_fd;                   /* eventfd blocking ibv_get_cq_event sleeps in */
	unsigned waiters;              /* threads asleep in wait_fd (under lock) */
	/* A thread waits for this channel's events serving the NIC itself
	 * (engine/wait.c): events other threads queue ring owner_bell. */
	uint32_t owner_tid;            /* under lock; 0: none */
	int owner_bell;
	/* How this program waits: positive while its ibv_get_cq_event calls
	 * mostly block (then arming needs no hand-over to the progress
	 * thread: the waiting thread serves the socket); zero for a
	 * program that polls the fd and takes ready events. */
	_Atomic int blocks_score;
	/* When a program's own poll or epoll on a set holding this fd last
	 * slept serving the NIC (verbs/verbs_fdwait.c): arming then needs
	 * no hand-over either. */
	_Atomic uint64_t fdwait_ns;
};

enum srn_cq_arm { SRN_CQ_DISARMED, SRN_CQ_ARM_NEXT, SRN_CQ_ARM_SOLICITED };

struct srn_cq {
	union {
		struct ibv_cq ibcq;
		struct ibv_cq_ex ibcq_ex;
	};
	struct srn_nic *nic;
	struct srn_context *ctx;
	struct srn_async_ref async_ref; /* its events read, not yet acknowledged */
	struct srn_channel *channel;
	struct ibv_wc *ring;
	uint32_t size;                 /* ring slots, a power of two */
	uint32_t head, tail;           /* free-running: head = next to fill */
	enum srn_cq_arm arm;
	enum srn_cq_arm fired_arm;     /* the arm that raised the pending event */
	bool event_maybe_pending;      /* an event may wait unread in the channel */
	bool armed_looked;             /* polled empty since the last arm */
	/* ibv_poll_cq of this CQ is receiving in its own thread (under
	 * nic->lock): an event its completions raise waits for the pop that
	 * follows (srn_cq_fire_deferred) instead of being written to the
	 * channel and, the ring drained, withdrawn again. */
	bool app_polling;
	bool fire_deferred;            /* an event is due once that pop is done */
	bool overflowed;
	int nqps;                      /* QPs using this CQ */
	unsigned events_queued;
	struct srn_diag_obj *diag;        /* events handed out, to be acked */
	uint64_t *ts;                  /* completion time per slot (cq_ex), or NULL */
	struct ibv_wc cur;             /* cq_ex: the completion being read */
	uint64_t cur_ts;
};

static inline struct srn_cq *srn_cq(struct ibv_cq *c) { return (struct srn_cq *)c; }
static inline struct srn_channel *srn_channel(struct ibv_comp_channel *c)
{
	return (struct srn_channel *)c;
}

int srn_cq_init(struct srn_cq *cq, int cqe);
void srn_cq_fini(struct srn_cq *cq);
/* Whether this poll is an event-driven program's last look before it
 * sleeps: the first empty poll of an armed CQ ("arm, poll once more,
 * then wait on the channel").  The poll stamped the application active,
 * which keeps the progress thread off the socket for a millisecond or
 * more; the caller hands progress over instead (after unlocking).  Later
 * empty polls are a program that keeps polling, and stay active.  Must
 * hold nic->lock. */
static inline bool srn_cq_armed_look(struct srn_cq *cq, int got)
{
	if (got || cq->arm == SRN_CQ_DISARMED || cq->armed_looked)
		return false;
	cq->armed_looked = true;
	return true;
}

/* Add one completion; signals the channel if armed.  Must hold nic->lock.
 * Returns -ENOSPC on overflow (completion lost, CQ marked in error). */
int srn_cq_push(struct srn_cq *cq, const struct ibv_wc *wc, bool solicited);
int srn_cq_pop(struct srn_cq *cq, int n, struct ibv_wc *wc);
/* Remove every completion of QP qpn still in the ring, keeping the order
 * of the others (the QP went to RESET: libmlx5's mlx5_cq_clean).  Must
 * hold nic->lock. */
void srn_cq_clean(struct srn_cq *cq, uint32_t qpn);
/* End of an ibv_poll_cq pass that received with app_polling set: the
 * event its completions deferred is raised now if completions are left
 * in the ring; none is (and the arm stays as it was) if the poll took
 * them all, which is what the channel would hold after the event was
 * written and then withdrawn by srn_cq_drained. */
void srn_cq_fire_deferred(struct srn_cq *cq);
/* The ring just became empty by polling: an event still unread in the
 * channel announces completions the application has already taken.
 * Withdraw it and re-arm as before, so the application neither wakes for
 * nothing nor loses its arm (see DESIGN.md, completion events). */
void srn_cq_drained(struct srn_cq *cq);

int srn_channel_init(struct srn_channel *ch, struct srn_context *ctx);
void srn_channel_fini(struct srn_channel *ch);
void srn_channel_notify(struct srn_channel *ch, struct srn_cq *cq);
/* Remove every pending event of cq (CQ being destroyed). */
bool srn_channel_forget(struct srn_channel *ch, struct srn_cq *cq);
int srn_channel_get(struct srn_channel *ch, struct srn_cq **cq);
/* Take the next event if one is queued: 0, else -EAGAIN. */
int srn_channel_take(struct srn_channel *ch, struct srn_cq **cq);
/* Become the thread that waits for this channel's events while serving
 * the NIC: false (nothing changed) if an event is already queued.  Until
 * srn_channel_unown, an event queued by another thread writes bell_fd. */
bool srn_channel_own(struct srn_channel *ch, uint32_t tid, int bell_fd);
void srn_channel_unown(struct srn_channel *ch);
/* The program's ibv_get_cq_event blocked (true) or found an event
 * ready (false); srn_channel_blocks: it usually blocks. */
void srn_channel_note_wait(struct srn_channel *ch, bool blocked);
#define SRN_FDWAIT_HINT_NS 10000000ull     /* 10 ms */
/* The program lately waited for this channel in its own poll or epoll,
 * through verbs/verbs_fdwait.c, which serves the device while it sleeps. */
static inline bool srn_channel_fdwaited(struct srn_channel *ch)
{
	uint64_t fw = atomic_load_explicit(&ch->fdwait_ns, memory_order_relaxed);
	return fw && srn_now_ns() - fw < SRN_FDWAIT_HINT_NS;
}
static inline bool srn_channel_blocks(struct srn_channel *ch)
{
	return atomic_load_explicit(&ch->blocks_score, memory_order_relaxed) > 0 ||
	       srn_channel_fdwaited(ch);
}
/* An event is queued. */
bool srn_channel_pending(struct srn_channel *ch);

#endif
