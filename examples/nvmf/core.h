/*
 * core.h - the NVMe controller side, independent of the transport.
 *
 * A transport hands every command it received to nvmf_exec() with the
 * command's data (host-to-controller data already fetched, or a buffer
 * for controller-to-host data) and sends the completion it gets back.
 * The core owns subsystems, namespaces and controllers; it never touches
 * a socket or a QP.
 *
 * Threads (tgt_thread.c): every queue is served by one thread, its owner,
 * and only the owner touches the queue's fields (ctrl, sqhd, ...) and
 * calls nvmf_exec() or nvmf_q_gone() for it.  What controllers share
 * across threads is under the target's one lock (`lock`): the controller
 * table, each controller's queue-ID table, CC, KATO, features, teardown.
 * Connect, Property Get/Set and admin commands take it; I/O commands do
 * not: they read CSTS (an atomic), the subsystem (fixed once running) and
 * set ka_seen (an atomic), so I/O threads never wait for each other.
 *
 * Lifetimes: a queue (struct nvmf_q) belongs to its transport connection;
 * Connect ties it to a controller (q->ctrl, one reference).  The
 * controller is torn down when its admin queue goes, its keep-alive
 * timer expires, or (its I/O queues only) CC.EN is cleared: under the
 * lock it leaves the controller table (and each queue its queue-ID
 * table), the queues are marked (kill_req) and their owners asked to
 * close them (q->kill).  A queue's owner lets go of the controller in
 * nvmf_q_gone(), which the transport calls when the queue dies; the last
 * reference frees it.  So a thread mid-command on an I/O queue while
 * another tears the controller down still holds a live controller, and
 * its command fails (CSTS.RDY is clear, kill_req set) instead of
 * touching freed memory.
 */
#ifndef NVMF_CORE_H
#define NVMF_CORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvme.h"

#define NVMF_MAX_NS 8
#define NVMF_MAX_SUBSYS 8
#define NVMF_MAX_ALLOW 8
#define NVMF_MAX_CTRL 64
#define NVMF_MAX_PORTS 2
#define NVMF_MAX_THREADS 64
#define NVMF_NS_STRIPES 64

/* SMART counters, one set per serving thread (each on its own cache
 * line, so I/O threads do not share one); the log page sums them. */
struct nvmf_stats {
	uint64_t rd_cmds, wr_cmds, rd_units, wr_units;
} __attribute__((aligned(64)));

struct nvmf_ns {
	uint32_t nsid;
	uint64_t nlb;     /* size in LBAs */
	int fd;           /* file or block device, or -1 */
	uint8_t *ram;     /* RAM namespace, or NULL */
	uint8_t nguid[16];
	/* RAM served by several threads: a lock per 64 KiB stripe (io.c), or
	 * NULL with one thread.  Hosts may write a block from two queues at
	 * once (NVMe leaves the data undefined, but the target must not race),
	 * and order their commands to a block through their own process,
	 * which ours cannot see: the stripe lock orders the copies. */
	pthread_mutex_t *stripes;
};

struct nvmf_subsys {
	char nqn[NVMF_NQN_LEN + 1];
	bool discovery;
	bool allow_any;
	struct nvmf_ns ns[NVMF_MAX_NS];
	unsigned nns;
	char allow[NVMF_MAX_ALLOW][NVMF_NQN_LEN + 1];
	unsigned nallow;
	char sn[21];
};

struct nvmf_port { /* what the discovery log reports */
	uint8_t trtype;
	char traddr[64];
	char trsvcid[16];
};

struct nvmf_q;

struct nvmf_ctrl {
	/* Set at the admin Connect, then only read. */
	uint16_t cntlid;
	struct nvmf_tgt *t;
	struct nvmf_subsys *ss;
	char hostnqn[NVMF_NQN_LEN + 1];
	uint8_t hostid[16];
	/* Under t->lock. */
	uint32_t cc, aec;
	uint32_t kato;             /* ms, 0 = off */
	uint64_t ka_check_ns;      /* next keep-alive check */
	uint16_t nioq;             /* I/O queues granted (Set Features) */
	unsigned naer;             /* Asynchronous Event Requests held */
	bool dead;                 /* torn down: out of t->ctrls, its queues told */
	unsigned nref;             /* queues whose ctrl this is; freed at 0 once dead */
	struct nvmf_q *q[NVMF_MAX_QUEUES + 1]; /* the queue-ID table */
	/* Atomics: the I/O path reads and sets them without the lock. */
	uint32_t csts;             /* written under the lock */
	bool ka_seen;              /* a command since the last check */
};

struct nvmf_q {
	/* The owner thread's alone (see above). */
	struct nvmf_ctrl *ctrl;    /* NULL until Connect, and after nvmf_q_gone() */
	uint16_t qid;
	uint16_t sqsize;           /* 0's based, from Connect */
	uint16_t sqhd;
	bool no_sqflow;            /* Connect CATTR bit 2 */
	int cm_qid, cm_sqsize;     /* from the transport's own handshake, -1 if none */
	unsigned thr;              /* the owner's index: its counters */
	void *xport;
	/* Set (atomic, under t->lock) when the controller let go of the queue:
	 * its commands fail from then on and its owner closes it. */
	int kill_req;
	/* The transport: have the owner close this queue soon.  Called with
	 * t->lock held, from any thread, so it must not call into the core
	 * (it wakes the owner, which sees kill_req). */
	void (*kill)(struct nvmf_q *q);
};

/* One command: the SQE, its data buffer and the completion. */
struct nvmf_req {
	struct nvme_sqe sqe;
	uint8_t *data;     /* H2C: the data; C2H: where to put it */
	uint32_t len;      /* the SGL's length */
	uint32_t xfer;     /* C2H: bytes produced */
	struct nvme_cqe cqe;
};

struct nvmf_tgt {
	/* Configuration: set before the threads start, then only read. */
	struct nvmf_subsys ss[NVMF_MAX_SUBSYS + 1]; /* [0] is the discovery subsystem */
	unsigned nss;
	struct nvmf_port ports[NVMF_MAX_PORTS];
	unsigned nports;
	pthread_mutex_t lock;      /* the controllers' shared state, as above */
	/* Under lock. */
	struct nvmf_ctrl *ctrls[NVMF_MAX_CTRL];
	uint16_t next_cntlid;
	uint64_t now_ns;   /* refreshed by nvmf_tick(), for keep-alive */
	unsigned ka_expired;
	/* Each slot written by its thread only (atomic adds), read by the log. */
	struct nvmf_stats stats[NVMF_MAX_THREADS];
};

enum { NVMF_DONE = 0, NVMF_HELD = 1 };

/* core.c */
void nvmf_tgt_init(struct nvmf_tgt *t);
struct nvmf_subsys *nvmf_subsys_add(struct nvmf_tgt *t, const char *nqn);
int nvmf_exec(struct nvmf_tgt *t, struct nvmf_q *q, struct nvmf_req *r);
void nvmf_reject(struct nvmf_q *q, struct nvmf_req *r, uint16_t st);
void nvmf_q_gone(struct nvmf_q *q);
void nvmf_tick(struct nvmf_tgt *t, uint64_t now_ns);
void nvmf_set_status(struct nvmf_req *r, uint16_t st);
uint64_t nvmf_now_ns(void);

/* admin.c; with t->lock held */
uint16_t nvmf_admin(struct nvmf_ctrl *c, struct nvmf_req *r, int *held);

/* io.c */
uint16_t nvmf_io(struct nvmf_ctrl *c, struct nvmf_stats *st, struct nvmf_req *r);
int nvmf_ns_open(struct nvmf_ns *ns, const char *spec);
int nvmf_ns_share(struct nvmf_ns *ns);
int nvmf_ns_rw(struct nvmf_ns *ns, bool write, uint8_t *buf, uint64_t off, size_t len);
void nvmf_ns_close(struct nvmf_ns *ns);
struct nvmf_ns *nvmf_ns_find(struct nvmf_subsys *ss, uint32_t nsid);

#endif
