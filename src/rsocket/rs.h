/*
 * rs.h - one rsocket (SOCK_STREAM over an RC QP; SOCK_DGRAM sockets keep
 * their own state in rs->ds, dgram.h) and the calls between the files of
 * src/rsocket/:
 *   table.c   socket numbers to rsockets, the global defaults
 *   setup.c   rsocket/rbind/rlisten/raccept/rconnect over the rdma_cm API
 *   cmev.c    connection events (rdma_cm) driving the socket's state
 *   res.c     QP, CQ, buffers and registrations of a connection
 *   xfer.c    the data path: completions, credits, posting Writes
 *   stream.c  rsend/rrecv and their families
 *   wait.c    blocking without spinning; rpoll and rselect
 *   opts.c    socket options, rfcntl, names
 *   iomap.c   riomap, riounmap, riowrite
 *   close.c   rshutdown, rclose
 *   dgram*.c  datagram rsockets; the calls above hand them over
 * The socket number is the fd of the rsocket's own rdma_cm event channel,
 * so it never collides with another descriptor of the process and a
 * preload library can keep using it as a number.
 *
 * Locking: rs->lock guards every field below; it is dropped only while a
 * thread sleeps in poll() (wait.c).  The table lock (table.c) is taken
 * before rs->lock, never under it.  Both sit above the CM lock and the
 * nic locks: rdma_* and ibv_* calls are made under rs->lock.
 */
#ifndef SRN_RSOCKET_RS_H
#define SRN_RSOCKET_RS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "rsocket/dgram.h"
#include "rsocket/proto.h"

#define SRN_RS_SNDLOWAT 2048         /* least send-buffer room worth a message */
#define SRN_RS_MAX_XFER 65536        /* largest single data Write */
#define SRN_RS_GATHER_MAX 1024       /* inline data gathered from iovecs on the stack */
#define SRN_RS_QP_MIN 16
#define SRN_RS_QP_MAX 0xfffe
#define SRN_RS_CTRL_SLOTS 4          /* send-queue entries kept for control messages */
#define SRN_RS_DEF_SQ 384            /* rdma-core's defaults */
#define SRN_RS_DEF_RQ 384
#define SRN_RS_DEF_INLINE 64
#define SRN_RS_DEF_MEM (1u << 17)
#define SRN_RS_MAX_MEM (1u << 28)    /* a buffer size option past this is refused */
#define SRN_RS_RESOLVE_MS 2000
#define SRN_RS_CLOSE_MS 3000         /* rclose waits this long for sends to finish */
#define SRN_RS_PROBE_MS 5000         /* a blocked wait checks that the peer lives this often */
#define SRN_RS_WR_RECV (1ull << 63)  /* work request id of a receive; sends carry their immediate */

enum srn_rs_state {
	SRN_RS_INIT,
	SRN_RS_BOUND,
	SRN_RS_LISTENING,
	SRN_RS_RESOLVING,            /* active: address, then route */
	SRN_RS_CONNECTING,           /* active: REQ out */
	SRN_RS_ACCEPTING,            /* passive: REP out, RTU not seen */
	SRN_RS_CONNECTED,            /* readable/writable say which halves are open */
	SRN_RS_DISCONNECTED,         /* both halves closed, orderly */
	SRN_RS_ERROR,                /* failed: err says why */
};

struct srn_rs_iomr {                 /* a local buffer riomap registered */
	struct srn_rs_iomr *next;
	struct ibv_mr *mr;
	uint64_t offset;
	int index;                   /* slot in the peer's table, -1: not remote-writable */
	bool sent;                   /* its entry went to the peer */
};

struct srn_rs {
	int fd;                      /* the socket number (ch->fd) */
	pthread_mutex_t lock;
	int refs;                    /* the table's, and each srn_rs_get (table lock) */
	enum srn_rs_state state;
	bool readable, writable;
	bool passive;                /* made by raccept */
	int err;                     /* SO_ERROR: positive errno, 0 */
	int fd_flags;                /* O_NONBLOCK as rfcntl set it */
	int domain;
	struct srn_ds *ds;           /* SOCK_DGRAM: everything else (dgram.h); NULL for a stream */

	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct srn_rs *accept_head, *accept_tail;   /* listener: accepted, not yet raccept'ed */
	struct srn_rs *accept_next;
	int backlog, nqueued;

	/* options, fixed once the connection's resources exist */
	uint32_t sbuf_size, rbuf_size;
	uint16_t sq_size, rq_size, sq_inline, iomap_size;
	uint64_t so_opts, tcp_opts, ipv6_opts;   /* bit per boolean option set */
	int keepalive_time;

	/* resources (res.c) */
	struct ibv_comp_channel *cq_ch;
	struct ibv_cq *cq;
	bool cq_armed;
	int64_t next_probe_ms;       /* when a blocked wait next probes the peer (0: not armed) */
	uint8_t *sbuf, *rbuf;
	struct srn_rs_sge *tslots;   /* SGL slots the peer writes, then our iomap table */
	struct ibv_mr *smr, *rmr, *tmr;

	/* send side */
	uint16_t sseq_no, sseq_comp; /* messages sent; the peer lets us send up to sseq_comp */
	int tslot;                   /* slot of tslots we write data into now */
	int sqe_avail;
	uint32_t sbuf_avail, sbuf_head;   /* room in sbuf; where the next copy goes */
	unsigned ctrl_seq, ctrl_max; /* control messages posted; completed + SRN_RS_CTRL_SLOTS */
	bool swap;                   /* the peer's byte order differs */
	struct srn_rs_sge peer_slots;   /* where the peer's SGL slots are (length: count) */
	int peer_slot;               /* next of them we grant buffer through */
	struct srn_rs_sge peer_iomap;   /* the peer's iomap table (length: entries) */

	/* receive side */
	uint16_t rseq_no, rseq_comp; /* messages consumed; next credit update when reached */
	uint32_t rbuf_free;          /* consumed and not yet granted again */
	uint32_t rbuf_grant_off;     /* the half we grant next */
	uint32_t rbuf_read;          /* where the next unread byte is */
	uint32_t rbuf_queued;        /* bytes received and not read (sanity bound) */
	uint32_t *rmsg;              /* lengths of received data messages, a ring */
	unsigned rmsg_head, rmsg_tail, rmsg_size;
	unsigned recv_repost;        /* receives consumed, to post again */

	/* iomap (iomap.c) */
	struct srn_rs_iomr *iomaps;
	bool iomap_pending;
};

/* table.c */
int srn_rs_table_add(struct srn_rs *rs);
void srn_rs_table_del(struct srn_rs *rs);
/* The rsocket of a number, locked; NULL (errno EBADF) if none. */
struct srn_rs *srn_rs_get(int fd);
void srn_rs_put(struct srn_rs *rs);
/* Is fd an rsocket?  (rpoll's test; takes no socket lock.) */
bool srn_rs_is_rsocket(int fd);
struct srn_rs *srn_rs_alloc(const struct srn_rs *inherit);
void srn_rs_free(struct srn_rs *rs);
int srn_rs_seterr(int neg);     /* -errno → -1 with errno set */

/* cmev.c: a non-blocking event channel for one rsocket. */
struct rdma_event_channel *srn_rs_new_channel(void);
/* cmev.c: process the events queued in rs->ch without blocking. */
void srn_rs_cm_progress(struct srn_rs *rs);
/* The connect data we send (REQ or REP). */
void srn_rs_conn_ours(struct srn_rs *rs, uint8_t out[SRN_RS_CONN_LEN]);
/* Take the peer's connect data; -EPROTO if it is no rsocket's. */
int srn_rs_conn_theirs(struct srn_rs *rs, const void *pdata, size_t len);

/* res.c */
int srn_rs_res_create(struct srn_rs *rs);
void srn_rs_res_destroy(struct srn_rs *rs);

/* xfer.c */
void srn_rs_poll_cq(struct srn_rs *rs);
void srn_rs_credits(struct srn_rs *rs);
bool srn_rs_can_send(const struct srn_rs *rs);
bool srn_rs_have_data(const struct srn_rs *rs);
bool srn_rs_ctrl_avail(const struct srn_rs *rs);
int srn_rs_post_ctrl(struct srn_rs *rs, enum srn_rs_ctrl c);
int srn_rs_post_write(struct srn_rs *rs, uint32_t imm, bool with_imm, const void *buf,
		      uint32_t len, uint64_t raddr, uint32_t rkey, bool from_sbuf);
bool srn_rs_all_sent(const struct srn_rs *rs);
/* Blocked and nothing heard: a zero-length Write the peer's NIC must
 * acknowledge, so a peer that died without a word fails our QP (retries
 * exhausted) instead of leaving us asleep for ever.  now_ms: monotonic. */
void srn_rs_probe(struct srn_rs *rs, int64_t now_ms);
bool srn_rs_connected(const struct srn_rs *rs);

/* wait.c: progress until test(rs) holds; -EAGAIN if it does not and the
 * call may not block; timeout_ms < 0 waits as long as it takes.  Must
 * hold rs->lock (dropped while asleep). */
int srn_rs_wait(struct srn_rs *rs, bool nonblock, int timeout_ms, bool (*test)(const struct srn_rs *));
void srn_rs_progress(struct srn_rs *rs);

/* iomap.c: send queued iomap entries before data. */
int srn_rs_send_iomaps(struct srn_rs *rs, bool nonblock);
void srn_rs_iomap_free_all(struct srn_rs *rs);

/* close.c */
void srn_rs_shutdown_locked(struct srn_rs *rs, int how);

#endif
