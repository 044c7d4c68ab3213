/*
 * core.h - the NVMe controller side, independent of the transport.
 *
 * A transport hands every command it received to nvmf_exec() with the
 * command's data (host-to-controller data already fetched, or a buffer
 * for controller-to-host data) and sends the completion it gets back.
 * The core owns subsystems, namespaces and controllers; it never touches
 * a socket or a QP.  The whole target runs in one thread (tgt.c), so
 * nothing here takes a lock.
 *
 * Lifetimes: a queue (struct nvmf_q) belongs to its transport connection;
 * Connect ties it to a controller.  The controller lives while its admin
 * queue does: when the admin queue goes (or the keep-alive timer
 * expires) every I/O queue is detached and its transport told to close
 * it (q->kill), so no queue ever points at a freed controller.
 */
#ifndef NVMF_CORE_H
#define NVMF_CORE_H

#include <stdbool.h>
#include <stdint.h>

#include "nvme.h"

#define NVMF_MAX_NS 8
#define NVMF_MAX_SUBSYS 8
#define NVMF_MAX_ALLOW 8
#define NVMF_MAX_CTRL 64
#define NVMF_MAX_PORTS 2

struct nvmf_ns {
	uint32_t nsid;
	uint64_t nlb;     /* size in LBAs */
	int fd;           /* file or block device, or -1 */
	uint8_t *ram;     /* RAM namespace, or NULL */
	uint8_t nguid[16];
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
	uint16_t cntlid;
	struct nvmf_tgt *t;
	struct nvmf_subsys *ss;
	char hostnqn[NVMF_NQN_LEN + 1];
	uint8_t hostid[16];
	uint32_t cc, csts, aec;
	uint32_t kato;             /* ms, 0 = off */
	uint64_t ka_check_ns;      /* next keep-alive check */
	bool ka_seen;              /* a command since the last check */
	uint16_t nioq;             /* I/O queues granted (Set Features) */
	bool nioq_set;
	unsigned naer;             /* Asynchronous Event Requests held */
	struct nvmf_q *q[NVMF_MAX_QUEUES + 1];
};

struct nvmf_q {
	struct nvmf_ctrl *ctrl;    /* NULL until Connect, and after teardown */
	uint16_t qid;
	uint16_t sqsize;           /* 0's based, from Connect */
	uint16_t sqhd;
	bool no_sqflow;            /* Connect CATTR bit 2 */
	int cm_qid, cm_sqsize;     /* from the transport's own handshake, -1 if none */
	void *xport;
	void (*kill)(struct nvmf_q *q); /* the transport: close this queue soon */
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
	struct nvmf_subsys ss[NVMF_MAX_SUBSYS + 1]; /* [0] is the discovery subsystem */
	unsigned nss;
	struct nvmf_port ports[NVMF_MAX_PORTS];
	unsigned nports;
	struct nvmf_ctrl *ctrls[NVMF_MAX_CTRL];
	uint16_t next_cntlid;
	/* SMART counters, target-wide */
	uint64_t rd_cmds, wr_cmds, rd_units, wr_units;
	uint64_t now_ns;   /* refreshed by the loop, for keep-alive */
	unsigned ka_expired;
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

/* admin.c */
uint16_t nvmf_admin(struct nvmf_ctrl *c, struct nvmf_req *r, int *held);

/* io.c */
uint16_t nvmf_io(struct nvmf_ctrl *c, struct nvmf_req *r);
int nvmf_ns_open(struct nvmf_ns *ns, const char *spec);
void nvmf_ns_close(struct nvmf_ns *ns);
struct nvmf_ns *nvmf_ns_find(struct nvmf_subsys *ss, uint32_t nsid);

#endif
