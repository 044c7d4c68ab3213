/*
 * cm.h - softrnic's RDMA connection manager: the rdma_cm state machine
 * and IBTA CM protocol under librdmacm.so.1 (src/rdmacm/ is the exported
 * surface).  It sits above verbs and uses only the public ibv_* calls of
 * libibverbs.so.1, plus softrnic_create_gsi_qp for each device's QP1.
 *
 * Locking: one mutex (srn_cm.lock) guards every id, channel, connection
 * and device of the CM; the CM thread (gsi.c) takes it to process MADs
 * and timers.  Verbs calls made under it take the nic lock below it, and
 * nothing under the nic lock calls up, so the order is cm lock → nic lock.
 */
#ifndef SRN_CM_CM_H
#define SRN_CM_CM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "cm/mad.h"
#include "diag/clock.h"

#define SRN_CM_MAX_DEV 8
/* RoCE paths have no SA: the packet lifetime rdma_cm uses for them
 * (CMA_IBOE_PACKET_LIFETIME), its CM response timeout and retries. */
#define CMA_PACKET_LIFETIME 16
#define CMA_CM_RESPONSE_TIMEOUT 20
#define CMA_MAX_CM_RETRIES 15
#define CMA_MRA_SERVICE_TIMEOUT 24
#define CMA_DEFAULT_ACK_TIMEOUT 18    /* 2 × lifetime: 4.096 us << 18 ≈ 1.07 s */
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
	SRN_CM_CNT_REQ_BACKLOG_DROP,   /* a REQ dropped: the listener's backlog was full */
	SRN_CM_CNT_PEER_DIED,          /* a same-host peer process died (peer_watch.c) */
	SRN_CM_CNT_MAX
};

/* One device's QP1 (gsi.c). */
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

/* rdma_cm id states (as rdma-core names them). */
enum srn_cm_state {
	SRN_CMS_IDLE,
	SRN_CMS_ADDR_QUERY, SRN_CMS_ADDR_RESOLVED, SRN_CMS_ROUTE_QUERY, SRN_CMS_ROUTE_RESOLVED,
	SRN_CMS_ADDR_BOUND, SRN_CMS_LISTEN,
	SRN_CMS_REQ_SENT,              /* active: REQ out, waiting for REP */
	SRN_CMS_REP_RCVD,              /* active: REP in, CONNECT_RESPONSE given, RTU not yet */
	SRN_CMS_REQ_RCVD,              /* passive: CONNECT_REQUEST given, not answered */
	SRN_CMS_REP_SENT,              /* passive: REP out, waiting for RTU */
	SRN_CMS_ESTABLISHED,
	SRN_CMS_DREQ_SENT, SRN_CMS_DREQ_RCVD,
	SRN_CMS_TIMEWAIT,
	SRN_CMS_DISCONNECTED,          /* after TIMEWAIT or a failure: no connection */
};

struct srn_cm_chan;
struct srn_cm_mc;

struct srn_cm_id {
	struct rdma_cm_id id;          /* handed out */
	struct srn_cm_id *next;        /* all ids */
	struct srn_cm_chan *chan;
	/* A passive id of a synchronous listener has its own channel, but its
	 * CONNECT_REQUEST waits in the listener's (rdma_get_request). */
	struct srn_cm_chan *req_chan;
	bool sync;                     /* created without a channel: own channel, calls wait */
	enum srn_cm_state state;
	struct srn_cm_dev *dev;
	struct ibv_sa_path_rec path;
	int nevents;                   /* events given out and not acked */
	bool destroying;
	/* Bound by rdma_bind_addr or rdma_resolve_addr: the id holds its port.
	 * Passive ids share their listener's port and hold none, as the
	 * kernel's (cma_new_conn_id): a listener destroyed after accept
	 * frees the port for the next bind (perftest -R binds it twice). */
	bool owns_port;
	/* The port is written down for our other processes (port_files.c):
	 * port_name is its file in the directory. */
	bool port_file;
	char port_name[64];
	/* The same-host process behind the peer's device when the connection
	 * began (peer_watch.c); 0: not known (another host, no rings). */
	pid_t peer_pid;
	/* listener */
	struct srn_cm_id *listener;    /* passive ids: who took the REQ */
	/* listener: CONNECT_REQUEST events queued and not yet fetched, as
	 * ucma counts its backlog (id.c gives them back at fetch or drop) */
	int backlog, pending;
	struct ibv_qp_init_attr *ep_attr;  /* rdma_create_ep: QP for rdma_get_request */
	/* connection */
	uint32_t local_comm_id, remote_comm_id;
	uint64_t tid;
	uint8_t peer_gid[16];
	uint32_t remote_qpn;
	/* A REQ's or REP's Starting PSN is the PSN its sender expects to
	 * receive first, so the other side starts sending there (the kernel's
	 * CM reads it that way: its active side keeps the REQ's value as
	 * rq_psn).  recv_psn is ours, announced; send_psn is the peer's. */
	uint32_t recv_psn, send_psn;
	uint8_t resp_res, init_depth;  /* of this side's QP: max_dest_rd_atomic, max_rd_atomic */
	uint8_t retry_count, rnr_retry, ack_timeout;
	enum ibv_mtu mtu;
	uint8_t remote_cm_timeout;     /* what the peer gives us to answer */
	uint8_t max_cm_retries;
	bool ack_timeout_set, tos_set, reuseaddr, afonly;
	uint8_t tos;
	/* UD ids (sidr.c, rdmacm/mcast.c) */
	uint32_t qkey;                 /* 0 until set: RDMA_UDP_QKEY then */
	struct srn_cm_mc *mcs;         /* multicast groups joined (rdmacm/mcast.c) */
	/* retransmission of the last MAD we sent that awaits an answer */
	uint8_t last_mad[SRN_MAD_LEN];
	bool last_valid;
	uint64_t deadline_ns;          /* 0 = no timer */
	uint32_t timeout_ms;
	int retries_left;
	struct srn_cm_id *timer_next;
};

struct srn_cm_event {
	struct rdma_cm_event ev;       /* handed out */
	struct srn_cm_event *next;
	struct srn_cm_id *owner;       /* counted in owner->nevents */
	uint8_t pdata[SRN_CM_MAX_PDATA];
};

/* An event channel lives until it is destroyed (rdma_destroy_event_channel,
 * or its synchronous id going away) and no id and no sleeping thread uses
 * it any more.  Destroyed, it is off the live list, its fd is closed (-1),
 * its events are dropped and nothing is queued in it again. */
struct srn_cm_chan {
	struct rdma_event_channel ch;  /* fd: eventfd, one count per queued event */
	struct srn_cm_event *head, *tail;
	int nids;
	int waiters;                   /* threads blocked in rdma_get_cm_event */
	bool destroyed;                /* never ready again: its waiters stay asleep */
	struct srn_cm_chan *next_live; /* srn_cm.chans */
};

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

/* count.c: MADs in the device counters (`softrnic stat`).  dev NULL: a
 * MAD that did not come from the wire (peer_watch.c), not counted. */
enum srn_cm_count_dir { SRN_CM_COUNT_SENT, SRN_CM_COUNT_RCVD, SRN_CM_COUNT_DROPPED, SRN_CM_COUNT_DIRS };
void srn_cm_count_mad(const struct srn_cm_dev *dev, uint16_t attr, enum srn_cm_count_dir dir);
void srn_cm_count_malformed(const struct srn_cm_dev *dev);

/* gsi.c: open every device and its QP1, start the CM thread (once). */
int srn_cm_init(void);
/* Send a MAD to QP1 of gid on dev (must hold srn_cm.lock).  0 or -errno. */
int srn_cm_send(struct srn_cm_dev *dev, const uint8_t gid[16], const uint8_t mad[SRN_MAD_LEN]);
/* Receive and handle every MAD that has reached dev (must hold
 * srn_cm.lock). */
void srn_cm_dev_drain(struct srn_cm_dev *d);
/* The CM thread: look at timers again (a deadline moved earlier). */
void srn_cm_kick(void);
/* Called by the CM thread under srn_cm.lock for each received MAD. */
void srn_cm_recv(struct srn_cm_dev *dev, const uint8_t *mad, size_t len, const uint8_t src_gid[16]);
/* Called by the CM thread under srn_cm.lock: run expired timers; returns the
 * next deadline (0 = none). */
uint64_t srn_cm_timers(uint64_t now);
/* Which device has this address as its own (port ignored)?  NULL: none. */
struct srn_cm_dev *srn_cm_dev_by_addr(const struct sockaddr *a);
/* May an id bind to a that no device owns, without a device (loopback)? */
bool srn_cm_bind_without_dev(const struct sockaddr *a);
/* Which device reaches dst (src: a source to use, may be NULL)?  NULL: none. */
struct srn_cm_dev *srn_cm_dev_route(const struct sockaddr *src, const struct sockaddr *dst);
void srn_cm_addr_to_gid(const struct sockaddr *a, uint8_t gid[16]);

/* conn.c: the connection protocol.  All must hold srn_cm.lock; -errno. */
int srn_cm_connect(struct srn_cm_id *id, const struct rdma_conn_param *p);
int srn_cm_accept(struct srn_cm_id *id, const struct rdma_conn_param *p);
int srn_cm_reject(struct srn_cm_id *id, const void *pdata, uint8_t len);
int srn_cm_establish(struct srn_cm_id *id);
int srn_cm_disconnect(struct srn_cm_id *id);
/* The id goes away: tell the peer what the state asks (REJ, DREQ/DREP). */
void srn_cm_abort(struct srn_cm_id *id);
/* The one path record of an id (route.path_rec): our GID to the peer's,
 * P_Key 0xffff, the kernel's packet lifetime, at this MTU. */
void srn_cm_fill_path(struct srn_cm_id *id, enum ibv_mtu mtu);
int srn_cm_init_qp_attr(struct srn_cm_id *id, struct ibv_qp_attr *a, int *mask);
int srn_cm_qp_to(struct srn_cm_id *id, enum ibv_qp_state s);
void srn_cm_timer_stop(struct srn_cm_id *id);
/* Send m for id (tid set here); keep: remember it for the retry timer
 * and for answering a repeated request.  0 or -errno. */
int srn_cm_send_msg(struct srn_cm_id *id, struct srn_cm_msg *m, bool keep);
/* Send id's kept MAD again every ms, retries times, then expire it. */
void srn_cm_timer_arm(struct srn_cm_id *id, uint32_t ms, int retries);

/* sidr.c: UD ids (RDMA_PS_UDP, RDMA_PS_IB with UD QPs) resolve the
 * peer's QPN and Q_Key with SIDR_REQ/SIDR_REP.  conn.c's entry points
 * hand UD ids to these.  All must hold srn_cm.lock; -errno. */
int srn_cm_sidr_connect(struct srn_cm_id *id, const struct rdma_conn_param *p);
int srn_cm_sidr_accept(struct srn_cm_id *id, const struct rdma_conn_param *p);
int srn_cm_sidr_reject(struct srn_cm_id *id, const void *pdata, uint8_t len);
/* rdma_disconnect of a UD id: its QP to ERR, no message (as the kernel). */
int srn_cm_sidr_disconnect(struct srn_cm_id *id);
void srn_cm_sidr_abort(struct srn_cm_id *id);
/* A UD id's request went unanswered through every retry. */
void srn_cm_sidr_expire(struct srn_cm_id *id);
void srn_cm_sidr_recv(struct srn_cm_dev *dev, const struct srn_cm_msg *m, const uint8_t gid[16]);
int srn_cm_ud_init_qp_attr(struct srn_cm_id *id, struct ibv_qp_attr *a, int *mask);
uint32_t srn_cm_ud_qkey(const struct srn_cm_id *id);
/* The address handle to reach gid from id's device (ud events). */
void srn_cm_ud_ah_attr(const struct srn_cm_id *id, const uint8_t gid[16], struct ibv_ah_attr *ah);

/* A REQ for us: 0 when handled (connection request queued, MRA, REJ or
 * dropped), -ENOENT when no listener takes its service ID. */
int srn_cm_req_in(struct srn_cm_dev *dev, const struct srn_cm_msg *m, const uint8_t gid[16]);
/* REJ a REQ we keep no state for, with reason. */
void srn_cm_rej_req(struct srn_cm_dev *dev, const uint8_t gid[16], const struct srn_cm_msg *in,
		    uint16_t reason);

/* The peer's process died: end the id's connection as its kernel would. */
void srn_cm_peer_died(struct srn_cm_id *id);
/* The process exits: DREQ/REJ every connection (must hold srn_cm.lock). */
void srn_cm_exit_abort(void);

/* peer_watch.c: watch the process behind a same-host peer's device. */
void srn_cm_watch_peer(struct srn_cm_id *id);
/* An epoll event's pointer: if it is a watch, handle its peer's death and
 * return true. */
bool srn_cm_watch_fired(void *ptr);

/* steer.c: MADs of the other processes behind a shared device address
 * (link/udp_group.h) go to their CM.  Must hold srn_cm.lock. */
void srn_cm_steer_open(void);
void srn_cm_steer_close(void);
bool srn_cm_steer_mad(struct srn_cm_dev *d, const uint8_t *mad, size_t len,
		      const uint8_t src_gid[16]);
bool srn_cm_steer_fired(void *ptr);

/* held.c: REQs that found no listener wait a moment for one. */
void srn_cm_held_add(struct srn_cm_dev *dev, const struct srn_cm_msg *m, const uint8_t gid[16]);
/* A listener appeared: held REQs it takes go to it. */
void srn_cm_held_replay(void);
/* REJ held REQs whose time is up; the next deadline (0 = none). */
uint64_t srn_cm_held_expire(uint64_t now);

/* id.c: ids, channels and events. */
struct srn_cm_id *srn_cm_id_new(struct srn_cm_chan *chan, void *context, enum rdma_port_space ps,
				enum ibv_qp_type qpt);
void srn_cm_id_free(struct srn_cm_id *id);
/* A passive id for a request listener l took on dev from gid, with the
 * addresses of its CM header h (the request's destination is our source). */
struct srn_cm_id *srn_cm_child_new(struct srn_cm_id *l, struct srn_cm_dev *dev, const struct srn_cma_hdr *h,
				   const uint8_t gid[16], enum ibv_qp_type qpt);
struct srn_cm_chan *srn_cm_chan_new(void);
/* The channel's owner is done with it; its memory goes when nothing uses it. */
void srn_cm_chan_free(struct srn_cm_chan *c);
/* Is c a channel we handed out and nobody destroyed?  Callers' channel
 * pointers are checked with this before anything reads them. */
bool srn_cm_chan_live(const struct rdma_event_channel *c);
/* An id stops using c (nids--); frees a destroyed channel nobody uses. */
void srn_cm_chan_unref(struct srn_cm_chan *c);
/* Queue an event for id (copies pdata).  status: 0, -errno or a REJ reason. */
struct srn_cm_event *srn_cm_event_queue(struct srn_cm_id *id, enum rdma_cm_event_type type,
					int status, const void *pdata, size_t plen);
int srn_cm_get_event(struct srn_cm_chan *c, struct srn_cm_event **out);
void srn_cm_ack_event(struct srn_cm_event *e);
struct srn_cm_id *srn_cm_listener_for(uint64_t service_id, const struct sockaddr *dst);
/* Which listener takes a request (REQ or SIDR_REQ) for service_id on dev,
 * whose private data starts with the CM header (parsed into h)?  0 and
 * *out; -ENOENT: no such service here; -EINVAL: a bad header; -ENOBUFS:
 * the listener's backlog is full. */
int srn_cm_listener_take(struct srn_cm_dev *dev, uint64_t service_id, const uint8_t *pdata, size_t len,
			 struct srn_cma_hdr *h, struct srn_cm_id **out);
uint16_t srn_cm_id_port(const struct srn_cm_id *id);
int srn_cm_port_alloc(struct srn_cm_id *id, struct sockaddr *a);
bool srn_cm_port_in_use(enum rdma_port_space ps, const struct sockaddr *a, const struct srn_cm_id *except);
/* rdma_listen on a bound id: may it listen?  0, -EADDRINUSE, -EADDRNOTAVAIL. */
int srn_cm_listen_check(struct srn_cm_id *id);

/* Another id's hold on a port, as the kernel's port check sees it. */
struct srn_cm_binding {
	struct sockaddr_storage addr;
	bool reuseaddr, afonly;
};
/* May address a (with the caller's reuseaddr and afonly) share a port with
 * cur?  The kernel's cma_check_port: both reuseaddr, or both afonly in
 * two families: yes (0); either a wildcard: -EADDRNOTAVAIL; the same
 * address: -EADDRINUSE; else 0. */
int srn_cm_port_rule(const struct sockaddr *a, bool reuse, bool afonly, const struct srn_cm_binding *cur);

/* port_files.c: explicit ports across this user's processes.  Reserve the
 * id's bound port (listen: again, now without reuseaddr): 0 or what
 * srn_cm_port_rule says about another live process's hold. */
int srn_cm_port_reserve(struct srn_cm_id *id, bool listen);
/* Pick an ephemeral port for a (its address set, port 0) that neither
 * this process's ids nor another process's files hold, and write it down;
 * sets a's port.  0 or -EADDRNOTAVAIL (the range is full). */
int srn_cm_port_ephemeral(struct srn_cm_id *id, struct sockaddr *a);
void srn_cm_port_release(struct srn_cm_id *id);

#endif
