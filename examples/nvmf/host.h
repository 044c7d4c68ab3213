/*
 * host.h - the initiator: one queue per connection (struct hq) behind a
 * small table of transport operations, and the controller bring-up on
 * top (host.c): admin queue, Connect, CC.EN, Identify, I/O queues.
 *
 * A queue has `depth` command slots; slot i always carries CID i and owns
 * a data buffer of NVMF_MAX_DATA bytes (registered, on RDMA; with
 * `invalidate`, reachable remotely only through slot i's memory window,
 * bound per command).  The caller fills a slot's buffer for a write,
 * submits, and polls: the completion callback names the slot, whose
 * buffer then holds read data.  The host
 * polls (spins) its queues, as spdk_nvme_perf does, or, with a spin
 * budget, sleeps on them once idle (arm, wait_fd, drain).
 */
#ifndef NVMF_HOST_H
#define NVMF_HOST_H

#include <stdbool.h>
#include <stdint.h>

#include "nvme.h"

enum host_xport { HX_RDMA, HX_TCP };

struct host_opts {
	enum host_xport xport;
	const char *addr;
	int port;
	const char *src;        /* RDMA: source address to bind */
	const char *subnqn;
	const char *hostnqn;
	uint8_t hostid[16];
	bool no_incap;          /* never send I/O write data in the capsule */
	bool digest;            /* NVMe/TCP header and data digests */
	uint32_t kato;          /* ms */
	uint32_t nsid;          /* the namespace to use; 0: the first active one */
	int cm_qid, cm_hsqsize; /* RDMA: lie in the CM private data (probe), -1 = no */
	bool invalidate;        /* RDMA: keyed SGLs name a type-2 window per command and
				 * ask the target to invalidate it (perf --invalidate) */
};

/* How submit treats the SGL: AUTO builds it; RAW keeps the caller's and
 * sends `len` bytes of the slot's buffer as in-capsule data (may be 0). */
enum hq_mode { HQ_AUTO, HQ_RAW };

struct hq;
typedef void (*hq_cb)(void *arg, unsigned slot, const struct nvme_cqe *cqe);

struct hq_ops {
	int (*open)(struct hq **out, const struct host_opts *o, uint16_t qid, uint16_t depth);
	void *(*buf)(struct hq *q, unsigned slot);
	int (*submit)(struct hq *q, unsigned slot, struct nvme_sqe *sqe, uint32_t len,
		      enum hq_mode mode);
	int (*poll)(struct hq *q, hq_cb cb, void *arg); /* completions seen, <0: queue broken */
	void (*set_incap)(struct hq *q, uint32_t incap);
	void (*close)(struct hq *q);
	/* Sleeping (perf --spin-us): the fd to wait on, arm before waiting
	 * (then poll once more), drain after waking. */
	int (*wait_fd)(struct hq *q);
	void (*arm)(struct hq *q);
	void (*drain)(struct hq *q);
};
extern const struct hq_ops hq_rdma_ops, hq_tcp_ops;
extern int hq_rdma_last_reject; /* the status of the last rdma_cm REJECT */
int hq_tcp_raw(const struct host_opts *o, const void *out, size_t len, uint8_t *in, size_t cap);
/* An RDMA queue opened with `invalidate`: responses that invalidated the
 * command's window as asked, and those that did not (no Send with
 * Invalidate, another rkey, or one where none was asked). */
void hq_rdma_inv_counts(const struct hq *q, uint64_t *ok, uint64_t *bad);
/* The rkey of slot's window if the response to the slot's last command
 * invalidated it and nothing bound it since: a key that must no longer
 * work.  -ENOENT otherwise (or without windows). */
int hq_rdma_stale_rkey(const struct hq *q, unsigned slot, uint32_t *rkey);

struct host {
	struct host_opts o;
	const struct hq_ops *ops;
	struct hq *aq;
	struct hq *ioq[NVMF_MAX_QUEUES];
	unsigned nioq;
	uint16_t cntlid;
	uint32_t incap;    /* in-capsule data I/O commands send (0: --no-incap) */
	uint32_t ioccs;    /* what the controller takes (IOCCSZ): Connect data goes in it */
	uint32_t nsid;
	uint64_t nlb;      /* the namespace's size in LBAs */
	uint16_t last_status; /* of the last failed sync command */
	bool dead;         /* a sync command went unanswered: no clean shutdown */
};

/* host.c */
int host_sync(struct host *h, struct hq *q, struct nvme_sqe *sqe, uint32_t len,
	      enum hq_mode mode, struct nvme_cqe *cqe, int timeout_ms);
int host_connect_queue(struct host *h, struct hq *q, uint16_t qid, uint16_t sqsize,
		       struct nvme_cqe *cqe);
int host_start(struct host *h, const struct host_opts *o, unsigned nioq, uint16_t depth);
void host_stop(struct host *h);
void host_default_ids(struct host_opts *o);
uint16_t cqe_status(const struct nvme_cqe *c); /* SCT << 8 | SC */
uint64_t host_now_ns(void);

#endif
