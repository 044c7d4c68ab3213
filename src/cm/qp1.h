/*
 * qp1.h - the bottom of the CM: its state and lock, each device's
 * address and QP1, sending and receiving MADs on it, the counters, and
 * the doorbell that wakes the CM thread.  Nothing here knows what a MAD
 * means: received MADs go to the handler the caller passes in (the CM
 * thread's dispatcher, cm/thread.c), as ib_mad hands them to its agents.
 *
 * Locking: one mutex (srn_cm.lock) guards every id, channel, connection
 * and device of the CM (cm/cm.h says how it orders with the nic lock).
 */
#ifndef SRN_CM_QP1_H
#define SRN_CM_QP1_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <infiniband/verbs.h>

#include "cm/mad.h"
#include "diag/clock.h"
#include "wire/gsi_route.h"

#define SRN_CM_MAX_DEV 8
/* QP1's queues, as deep as the kernel's MAD layer makes them
 * (mad_recvq_size 512, mad_sendq_size 128): a program that connects
 * hundreds of ids at once (cmtime) sends and receives MADs in bursts,
 * and a MAD dropped here costs a 4.8 s CM retry. */
#define SRN_CM_NRECV 512
#define SRN_CM_NSEND 128
#define SRN_CM_NAH 32

enum srn_cm_cnt {
	SRN_CM_CNT_RX_MAD,
	SRN_CM_CNT_TX_MAD,
	SRN_CM_CNT_RX_BAD,             /* refused by srn_cm_mad_parse */
	SRN_CM_CNT_RX_NO_CONN,         /* for a connection we do not know */
	SRN_CM_CNT_RX_WRONG_STATE,     /* for a connection in another state */
	SRN_CM_CNT_TX_FAIL,
	SRN_CM_CNT_RETRIES,
	SRN_CM_CNT_REQ_HELD,           /* a REQ waited for its listener (held.c) */
	SRN_CM_CNT_REQ_REROUTED,       /* a held REQ went to the process that came to listen */
	SRN_CM_CNT_REQ_BACKLOG_DROP,   /* a REQ dropped: the listener's backlog was full */
	SRN_CM_CNT_PEER_DIED,          /* a same-host peer process died (peer_watch.c) */
	SRN_CM_CNT_MAX
};

/* One device's QP1 (qp1.c). */
struct srn_cm_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;             /* QP1's, and the PD ids get by default */
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;             /* receives; wakes the CM thread */
	struct ibv_cq *scq;            /* sends: reaped by whoever sends next */
	struct ibv_qp *qp;             /* QPN 1 */
	struct ibv_mr *mr;
	uint8_t *buf;                  /* NRECV × (GRH + MAD), then NSEND × MAD */
	uint32_t send_next, send_busy;
	uint8_t gid[16];
	unsigned member;               /* behind a shared address: the top byte of our comm IDs */
	struct sockaddr_storage addr;  /* the device's IP (from GID 0) */
	uint64_t guid;
	enum ibv_mtu mtu;
	uint8_t max_rd_atomic;
	/* The XRC domain the device's XRC ids share, opened at the first
	 * (rdmacm/ep.c; rdma-core's ucma_get_xrcd); kept, like pd, while
	 * the process lives. */
	struct ibv_xrcd *xrcd;
	struct { uint8_t gid[16]; struct ibv_ah *ah; } ah[SRN_CM_NAH];
	unsigned nah;
};

struct srn_cm_id;
struct srn_cm_chan;

/* A communication ID (or SIDR request ID) of ours on d from a counter:
 * the device's member number in the top byte (wire/gsi_route.h). */
static inline uint32_t srn_cm_comm_id(const struct srn_cm_dev *d, uint32_t counter)
{
	return d->member << SRN_GSI_ID_MEMBER_SHIFT | (counter & ((1u << SRN_GSI_ID_MEMBER_SHIFT) - 1));
}

struct srn_cm {
	pthread_mutex_t lock;
	pthread_cond_t cond;           /* signalled when an event is acked (destroy waits) */
	bool inited;
	int init_err;
	struct srn_cm_dev dev[SRN_CM_MAX_DEV];
	int ndev;
	struct srn_cm_id *ids;
	struct srn_cm_chan *chans;     /* live channels: the only ones a caller may name */
	pthread_t thread;
	bool thread_started;
	bool wait_failed;              /* the CM thread's epoll_wait failed: said once */
	pid_t pid;                     /* of the process that started the thread */
	_Atomic bool stop;             /* library destructor: the thread ends */
	int epfd, kick_fd;
	uint64_t cnt[SRN_CM_CNT_MAX];
	uint64_t cnt_attr_rx[16], cnt_attr_tx[16];
	uint32_t next_comm_id;
};

extern struct srn_cm srn_cm;

/* MADs in the device counters (`softrnic stat`).  dev NULL: a MAD that
 * did not come from the wire (peer_watch.c), not counted. */
enum srn_cm_count_dir { SRN_CM_COUNT_SENT, SRN_CM_COUNT_RCVD, SRN_CM_COUNT_DROPPED, SRN_CM_COUNT_DIRS };
void srn_cm_count_mad(const struct srn_cm_dev *dev, uint16_t attr, enum srn_cm_count_dir dir);
void srn_cm_count_malformed(const struct srn_cm_dev *dev);

/* Addresses and GIDs. */
/* Which device has this address as its own (port ignored)?  NULL: none. */
struct srn_cm_dev *srn_cm_dev_by_addr(const struct sockaddr *a);
/* May an id bind to a that no device owns, without a device (loopback)? */
bool srn_cm_bind_without_dev(const struct sockaddr *a);
/* Which device reaches dst (src: a source to use, may be NULL)?  NULL: none. */
struct srn_cm_dev *srn_cm_dev_route(const struct sockaddr *src, const struct sockaddr *dst);
void srn_cm_addr_to_gid(const struct sockaddr *a, uint8_t gid[16]);

/* Open ibdev into d and give it its QP1, receives posted.  0 or -errno
 * (d may be half open then: the CM does not start). */
int srn_cm_qp1_open(struct srn_cm_dev *d, struct ibv_device *ibdev);
/* Send a MAD to QP1 of gid on dev (must hold srn_cm.lock).  0 or -errno. */
int srn_cm_send(struct srn_cm_dev *dev, const uint8_t gid[16], const uint8_t mad[SRN_MAD_LEN]);
/* What takes a received MAD (must hold srn_cm.lock). */
typedef void srn_cm_mad_fn(struct srn_cm_dev *dev, const uint8_t *mad, size_t len,
			   const uint8_t src_gid[16]);
/* Receive every MAD that has reached dev and hand each to on_mad (must
 * hold srn_cm.lock). */
void srn_cm_qp1_poll(struct srn_cm_dev *d, srn_cm_mad_fn *on_mad);
/* The CM thread: look at timers again (a deadline moved earlier). */
void srn_cm_kick(void);

#endif
