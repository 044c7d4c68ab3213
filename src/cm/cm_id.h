/*
 * cm_id.h - what the CM keeps of one rdma_cm id (the kernel's
 * rdma_id_private and cm_id_private in one): its state, address, port,
 * connection and retransmission.  The type alone, so that the port rules
 * (ports.c) below the id functions (ids.c) can read it.  Must hold
 * srn_cm.lock to touch one.
 */
#ifndef SRN_CM_CM_ID_H
#define SRN_CM_CM_ID_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "cm/mad.h"

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
struct srn_cm_dev;
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
	/* The port is written down for our other processes (ports.c):
	 * port_name is its file in the directory. */
	bool port_file;
	char port_name[64];
	/* The same-host process behind the peer's device when the connection
	 * began (peer_watch.c); 0: not known (another host, no rings). */
	pid_t peer_pid;
	/* listener */
	struct srn_cm_id *listener;    /* passive ids: who took the REQ */
	/* listener: CONNECT_REQUEST events queued and not yet fetched, as
	 * ucma counts its backlog (ids.c gives them back at fetch or drop) */
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

#endif
