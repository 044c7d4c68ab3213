/*
 * nic.h - the state of one open device in one process (its engine, which
 * creates it and runs it, is engine/nic.h and engine/progress.c).
 *
 * Owns the link (nic->link), the progress thread (nic->engine), the QP
 * number space and the memory-key table (nic->tables), the transport's
 * lists of QPs with work (nic->lists) and the diagnostic segment
 * (nic->diag): grouped by who writes them.  One mutex (nic->lock) serialises the transport: packet
 * processing, posting, completion generation and key lookups.  That makes
 * ibv_dereg_mr trivially safe (it takes the lock, so no access to the
 * region is in flight when it returns) and keeps the first version simple;
 * finer locking is a performance change for later, documented in DESIGN.md.
 *
 * Lock order: nic->lock, then a CQ's channel lock / a context's async lock
 * (leaves).
 */
#ifndef SRN_CORE_NIC_H
#define SRN_CORE_NIC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/limits.h"
#include "core/snap.h"
#include "diag/clock.h"
#include "diag/counters.h"
#include "diag/shm.h"
#include "link/config.h"
#include "link/direct.h"
#include "link/shm.h"
#include "link/udp.h"
#include "link/udp_group.h"
#include "wire/gsi_route.h"     /* SRN_GSI_QPN */
#include "wire/icrc.h"

struct srn_device;
struct srn_qp;
struct srn_mr;
struct srn_xrcd;
struct srn_srq;
struct srn_egress;
struct srn_gro_batch;
struct srn_cc_dev;

#define SRN_QP_TABLE_BITS 12
#define SRN_QP_TABLE_SIZE (1u << SRN_QP_TABLE_BITS)
/* A QPN: member (link/udp_group.h) | generation | table slot; the
 * generation takes the bits the member leaves of the 24. */
#define SRN_QPN_GEN_MASK ((1u << (SRN_QPN_MEMBER_SHIFT - SRN_QP_TABLE_BITS)) - 1)
/* The link (link/): the socket and the same-host rings, and what the
 * transport and the engine keep next to them.  Written under nic->lock
 * by the receive path (rx, gro, rx_id_next), the transmit side (egress,
 * through transport/txq.c and engine/nic.c's unlock flush) and the
 * engine at create/destroy. */
struct srn_nic_link {
	struct srn_udp udp;
	struct srn_rx_batch rx;        /* receive buffers, used under lock */
	struct srn_egress *egress;     /* transmit side: rings, or the socket at burst end */
	struct srn_gro_batch *gro;     /* receive with UDP GRO (NULL: plain recvmmsg) */
	uint16_t rx_id_next;           /* IPv4 ID the next packet probably has (GSO) */
	/* Same-host peers: shared-memory rings instead of the socket
	 * (link/shm.h). */
	struct srn_shm shm;
	/* Same-host direct placement (link/direct.h): this device's table,
	 * which core/direct_pub.c keeps current, and the targets' tables this
	 * device places into as a requester (transport/direct.c).  direct_on:
	 * SOFTRNIC_DIRECT is not 0 and the rings are on without a fault
	 * injector.  direct_map_on: Writes and Reads may also copy through a
	 * mapping of a target's shared pages (SOFTRNIC_DIRECT_MAP is not 0). */
	struct srn_direct_own direct;
	struct srn_direct_req direct_req;
	bool direct_on;
	bool direct_map_on;
	/* This device placed directly since the engine last looked: same-host
	 * traffic, as a ring's delivery is (engine/progress.c udp_due). */
	bool direct_placed;
};
/* The engine (engine/): progress is driven by application threads in
 * post/poll, and a thread takes over when none has for a while
 * (engine/progress.c).  Written by the engine; the atomics are also read
 * and set without nic->lock (srn_nic_kick, srn_nic_tx_deferred, tx.c's
 * held ACKs). */
struct srn_nic_engine {
	pthread_t thread;
	bool thread_started;
	int kick_fd;                   /* eventfd: wake the progress thread */
	int ep_all;                    /* epoll: socket + kick */
	int ep_kick;                   /* epoll: kick only */
	_Atomic uint64_t last_app_ns;  /* last application-driven progress, 0 = app asleep */
	_Atomic bool stop;
	uint64_t bg_spin_ns;           /* progress thread busy-polls this long after socket traffic */
	/* While the rings carry traffic, an application's poll asks the
	 * socket only every SRN_UDP_POLL_GAP_NS. */
	uint64_t shm_rx_ns;            /* when a ring last delivered or we last placed directly */
	uint64_t udp_polled_ns;        /* when the socket was last asked */
	uint64_t udp_rx_pkts;          /* packets the socket delivered (busy poll) */
	uint64_t events_fired;         /* completion events queued on channels (busy poll) */
	/* Transmission waits for room in a ring (lists.tx not empty after a
	 * poll): nothing will wake the progress thread for it, so it looks
	 * again after SRN_TX_RETRY_NS. */
	_Atomic bool tx_waiting;
	/* Plain ACKs held past an application's poll so they leave with its
	 * next post; the progress thread sends them if it does not come. */
	_Atomic bool acks_deferred;
	uint64_t acks_held_ns;         /* when the held ACKs were held */
	unsigned acks_held_looks;      /* polls since, without a post */
	/* The progress thread sleeps until a packet or a kick (not a timer):
	 * it would not notice held ACKs, so none may be held. */
	_Atomic bool bg_deep_sleep;
	_Atomic bool life_held;        /* the progress thread holds the liveness mutex */
	/* epoll_pwait2 is missing (old kernel, valgrind): the progress
	 * thread sleeps with epoll_wait.  Its own. */
	bool epoll_ms;
	/* The progress thread sleeps until this time (UINT64_MAX: with no
	 * timeout; 0: it is not in that sleep).  A thread that sets an
	 * earlier deadline (a transport timer, a packet the fault injector
	 * holds) kicks it: stored sequentially consistent before it
	 * re-reads the deadlines, mirrored by the setter (srn_nic_deadline_set). */
	_Atomic uint64_t sleep_until;
	/* An application thread blocked in ibv_get_cq_event serves the
	 * socket and the rings itself (engine/wait.c), so the packet that
	 * brings its completion wakes it and nobody else: the socket's
	 * owner, its tid (0: none).  The progress thread stands aside
	 * meanwhile, sleeping only to its deadlines. */
	_Atomic uint32_t sock_owner;
	_Atomic uint32_t owner_epoch;  /* bumped by every owner leaving */
	/* The progress thread stands aside for longer than
	 * SRN_BG_RECHECK_NS (the owner has slept long): the owner leaving
	 * kicks it, so the hand-over stays bounded. */
	_Atomic bool aside_long;
	int bell_fd;                   /* eventfd the owner waits on besides the socket */
	/* Same-host senders' doorbell (link/shm_bell.h): whoever sleeps on
	 * the socket (the progress thread, an owner) sleeps on it too. */
	int ring_bell_fd;
	/* epoll the owner sleeps in (engine/wait.c): the sockets level-,
	 * the two bells edge-triggered, so a wake costs no read to empty
	 * a bell.  Others that watch the bells drain them (a count left
	 * behind is one spurious wake-up there). */
	int ep_wait;
};
/* Object tables: numbers and keys to objects.  Written by the verbs
 * that create and destroy the objects (core/nic.c, core/mr.c, srq.c,
 * mcast.c), looked up by the transport; all under nic->lock. */
struct srn_nic_tables {
	/* QP numbers: slot in the low bits, a generation above it, so a
	 * number is not reused soon after a QP is destroyed, and the member
	 * number of a shared address on top. */
	struct srn_qp *qps[SRN_QP_TABLE_SIZE];
	uint32_t qpn_gen;
	unsigned nqps;

	/* Memory keys: random byte << 24 | slot << 8 | key byte (core/mr.c);
	 * the key byte changes on every reuse of a slot so a stale key never
	 * matches a new region. */
	struct srn_mr **mrs;
	uint32_t mr_cap;
	uint8_t *mr_keybyte;           /* next key byte per slot */
	uint32_t mr_free_hint;

	/* XRC: domains opened and SRQs by number. */
	struct srn_xrcd *xrcds;
	struct srn_srq *srq_by_num[SRN_MAX_SRQ];
	uint32_t srqn_next;

	/* UD multicast groups joined (core/mcast.c). */
	struct srn_mcast_group *mcast[SRN_MAX_MCAST_GRP];
	int nmcast;
	bool mcast_sender_ready;
};
/* The transport's lists of QPs with work pending, linked through the
 * QP (resp.ack_next, tx_next, comp.timer_next).  Written by the
 * transport (tx.c, timers.c, qp_effects.c), drained by the engine. */
struct srn_nic_lists {
	/* QPs with an ACK to send at the end of the current receive batch,
	 * and QPs whose transmission stopped on a full same-host ring. */
	struct srn_qp *ack;
	struct srn_qp *tx;
	/* QPs with an armed retransmission or RNR timer; next_deadline is
	 * the earliest of them (0 = none), the progress thread's timeout. */
	struct srn_qp *timer;
	_Atomic uint64_t next_deadline;
};
/* What the tools see (diag/): set up by the engine at create; the
 * counters are bumped by every stage, the segment written through
 * core/snap.c and diag/. */
struct srn_nic_diag {
	struct srn_counters *cnt;      /* in the diagnostic segment (diag/shm.h) */
	struct srn_diag *seg;          /* the segment: object slots, event logs */
	struct srn_diag_busy *busy;    /* in the segment: the operation in progress */
};

struct srn_nic {
	/* Identity and configuration, set at create. */
	struct srn_device *dev;
	struct srn_dev_cfg cfg;        /* with the address actually bound */
	uint8_t gid[16];               /* GID index 0 */
	int ib_mtu;                    /* port max/active MTU (enum ibv_mtu) */
	pid_t pid;                     /* the process that created it (fork: not the child's) */

	pthread_mutex_t lock;
	_Atomic int lock_waiters;      /* threads blocked in srn_nic_lock */
	int lock_cancel_state;         /* the holder's cancel state before srn_nic_lock */

	struct srn_nic_link link;      /* socket, rings, transmit queue */
	struct srn_nic_engine engine;  /* progress thread, epoll, kick, clocks */
	struct srn_nic_tables tables;  /* QP numbers, memory keys, SRQs, groups */
	struct srn_nic_lists lists;    /* QPs with an ACK, a deferred send, a timer */
	struct srn_nic_diag diag;      /* counters and the diagnostic segment */
	struct srn_cc_dev *cc;         /* DCQCN settings (transport/cc.h), set at create */
};

/* QP number table.  Must hold nic->lock. */
int srn_nic_qp_add(struct srn_nic *nic, struct srn_qp *qp, uint32_t *qpn);
void srn_nic_qp_del(struct srn_nic *nic, uint32_t qpn);
/* The GSI QP (QP1) of this nic, for the connection manager: -EBUSY when
 * the nic has one already.  Must hold nic->lock. */
int srn_nic_qp_add_gsi(struct srn_nic *nic, struct srn_qp *qp, uint32_t *qpn);
struct srn_qp *srn_nic_qp_lookup(struct srn_nic *nic, uint32_t qpn);

/* Wake the progress thread (engine/progress.c) from its sleep. */
void srn_nic_kick(struct srn_nic *nic);
/* A transmission was deferred (a full same-host ring): make sure the
 * progress thread retries it even if nothing else wakes it. */
void srn_nic_tx_deferred(struct srn_nic *nic);
/* Something is due at `at` (ns, srn_now_ns), already published where the
 * progress thread looks for deadlines: wake it if it sleeps past that. */
void srn_nic_deadline_set(struct srn_nic *nic, uint64_t at);

/* Take nic->lock (leave it with srn_nic_unlock, engine/nic.h).  A
 * thread that has to wait says so, and the progress thread's busy poll
 * (engine/progress.c) stays off the lock until it got it: a mutex is not
 * fair, and a poller that re-locks right after unlocking
 * would keep an application's post waiting for as long as traffic lasts. */
static inline void srn_nic_lock(struct srn_nic *nic)
{
	int cs;
	/* Nothing done under the lock may be where a pthread_cancel of the
	 * program's thread takes effect: recvmmsg, sendmmsg and the
	 * doorbells' write() are cancellation points, and a thread
	 * cancelled in one left the lock held, the device dead for every
	 * other thread (test_cancel_in_verbs).  Restored by srn_nic_unlock. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	if (pthread_mutex_trylock(&nic->lock) != 0) {
		atomic_fetch_add(&nic->lock_waiters, 1);
		pthread_mutex_lock(&nic->lock);
		atomic_fetch_sub(&nic->lock_waiters, 1);
	}
	nic->lock_cancel_state = cs;
}

/* Let go of nic->lock without srn_nic_unlock's flush of what the holder
 * queued (a flag flip, a page move), restoring the cancel state. */
static inline void srn_nic_unlock_raw(struct srn_nic *nic)
{
	int cs = nic->lock_cancel_state;
	/* raw nic unlock: srn_nic_unlock flushed first; the others queue nothing */
	pthread_mutex_unlock(&nic->lock);
	pthread_setcancelstate(cs, NULL);
}

/* IP/UDP facts of packets this nic sends to dst, for their ICRC. */
void srn_ip_meta_for(const struct srn_nic *nic, const struct sockaddr *dst, struct srn_ip_meta *m);

#endif
