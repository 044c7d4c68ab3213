/*
 * mad.h - IBTA communication management MADs (IBTA vol 1 ch. 12-13) and
 * the RDMA IP CM service's private-data header, as they travel to QP1.
 *
 * A CM MAD is 256 bytes: the 24-byte common MAD header (base version 1,
 * management class 0x07, class version 2, method Send, a transaction ID
 * and the attribute ID naming the message) and 232 bytes of message.
 * Offsets below count from the start of the MAD; multi-byte fields are
 * big-endian; sub-byte fields are numbered from the most significant bit
 * as the IBTA tables do.  Pure functions: no state, no I/O, so the parser
 * is fuzzed alone (tests/fuzz_cm_mad.c).
 */
#ifndef SRN_CM_MAD_H
#define SRN_CM_MAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define SRN_MAD_LEN 256
#define SRN_MAD_HDR_LEN 24
#define SRN_MAD_BASE_VERSION 1
#define SRN_MAD_CLASS_CM 0x07
#define SRN_MAD_CM_CLASS_VERSION 2
#define SRN_MAD_METHOD_SEND 0x03
#define SRN_GSI_QKEY 0x80010000u
#define SRN_UD_GRH_LEN 40

/* Attribute IDs of the CM class (IBTA Table 105). */
enum srn_cm_attr {
	SRN_CM_ATTR_REQ = 0x0010,
	SRN_CM_ATTR_MRA = 0x0011,
	SRN_CM_ATTR_REJ = 0x0012,
	SRN_CM_ATTR_REP = 0x0013,
	SRN_CM_ATTR_RTU = 0x0014,
	SRN_CM_ATTR_DREQ = 0x0015,
	SRN_CM_ATTR_DREP = 0x0016,
	SRN_CM_ATTR_SIDR_REQ = 0x0017,
	SRN_CM_ATTR_SIDR_REP = 0x0018,
	SRN_CM_ATTR_LAP = 0x0019,
	SRN_CM_ATTR_APR = 0x001A,
};

/* Private data each message carries (IBTA Tables 106-113). */
#define SRN_CM_REQ_PDATA 92
#define SRN_CM_MRA_PDATA 222
#define SRN_CM_REJ_PDATA 148
#define SRN_CM_REP_PDATA 196
#define SRN_CM_RTU_PDATA 224
#define SRN_CM_DREQ_PDATA 220
#define SRN_CM_DREP_PDATA 224
#define SRN_CM_REJ_ARI 72
#define SRN_CM_SIDR_REQ_PDATA 216
#define SRN_CM_SIDR_REP_PDATA 136
#define SRN_CM_SIDR_REP_INFO 72
#define SRN_CM_MAX_PDATA SRN_CM_RTU_PDATA

/* REJ reasons used here (IBTA Table 109). */
enum srn_cm_rej_reason {
	SRN_CM_REJ_TIMEOUT = 1,
	SRN_CM_REJ_INVALID_COMM_ID = 6,
	SRN_CM_REJ_INVALID_SERVICE_ID = 8,
	SRN_CM_REJ_STALE_CONN = 10,
	SRN_CM_REJ_INVALID_TRANSPORT = 14,
	SRN_CM_REJ_INVALID_MTU = 26,
	SRN_CM_REJ_CONSUMER_DEFINED = 28,
};

/* SIDR_REP status (IBTA Table 116); the kernel names them IB_SIDR_*. */
enum srn_cm_sidr_status {
	SRN_SIDR_SUCCESS = 0,
	SRN_SIDR_UNSUPPORTED = 1,      /* no service with that ID (no listener) */
	SRN_SIDR_REJECT = 2,           /* the service provider said no */
	SRN_SIDR_NO_QP = 3,
	SRN_SIDR_REDIRECT = 4,
	SRN_SIDR_UNSUPPORTED_VERSION = 5,
};

/* "Message REJected / MRAed" codes. */
enum { SRN_CM_MSG_REQ = 0, SRN_CM_MSG_REP = 1, SRN_CM_MSG_OTHER = 2 };

/* Transport service type in a REQ (IBTA 12.6.5); 3 says "see the
 * extended transport type", whose value 1 is XRC (IBTA Annex A14, the
 * kernel's cm_req_set_qp_type). */
enum { SRN_CM_TRANSPORT_RC = 0, SRN_CM_TRANSPORT_UC = 1, SRN_CM_TRANSPORT_RD = 2,
       SRN_CM_TRANSPORT_EXT = 3 };
enum { SRN_CM_EXT_TRANSPORT_XRC = 1 };

struct srn_cm_req {
	uint32_t local_comm_id;
	uint64_t service_id;
	uint64_t ca_guid;
	uint32_t qkey;
	uint32_t qpn;                  /* 24 bits */
	uint8_t resp_res, init_depth;
	uint8_t remote_cm_timeout;     /* 5 bits: 4.096 us << n */
	uint8_t transport;             /* 2 bits */
	uint8_t flow_ctrl;             /* 1 bit */
	uint32_t psn;                  /* 24 bits: the sender's first receive PSN */
	uint8_t local_cm_timeout;      /* 5 bits */
	uint8_t retry_count;           /* 3 bits */
	uint16_t pkey;
	uint8_t mtu;                   /* 4 bits: enum ibv_mtu */
	uint8_t rnr_retry;             /* 3 bits */
	uint8_t max_cm_retries;        /* 4 bits */
	uint8_t srq;                   /* 1 bit */
	uint8_t ext_transport;         /* 3 bits: XRC (1) when transport is EXT, else 0 */
	uint16_t local_lid, remote_lid;
	uint8_t local_gid[16], remote_gid[16];
	uint32_t flow_label;           /* 20 bits */
	uint8_t packet_rate;           /* 6 bits */
	uint8_t traffic_class, hop_limit;
	uint8_t sl;                    /* 4 bits */
	uint8_t subnet_local;          /* 1 bit */
	uint8_t ack_timeout;           /* 5 bits */
	uint8_t pdata[SRN_CM_REQ_PDATA];
};

struct srn_cm_rep {
	uint32_t local_comm_id, remote_comm_id;
	uint32_t qkey;
	uint32_t qpn;                  /* 24 bits */
	/* 24 bits: an XRC target QP's number goes here, not in qpn (the
	 * kernel's cm_format_rep / cm_rep_get_qpn for XRC_TGT / XRC_INI) */
	uint32_t eecn;
	uint32_t psn;                  /* 24 bits: the sender's first receive PSN */
	uint8_t resp_res, init_depth;
	uint8_t target_ack_delay;      /* 5 bits */
	uint8_t failover;              /* 2 bits */
	uint8_t flow_ctrl;             /* 1 bit */
	uint8_t rnr_retry;             /* 3 bits */
	uint8_t srq;                   /* 1 bit */
	uint64_t ca_guid;
	uint8_t pdata[SRN_CM_REP_PDATA];
};

struct srn_cm_rej {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t msg_rejected;          /* 2 bits */
	uint8_t ari_len;               /* 7 bits, <= 72 */
	uint16_t reason;
	uint8_t ari[SRN_CM_REJ_ARI];
	uint8_t pdata[SRN_CM_REJ_PDATA];
};

struct srn_cm_mra {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t msg_mraed;             /* 2 bits */
	uint8_t service_timeout;       /* 5 bits */
	uint8_t pdata[SRN_CM_MRA_PDATA];
};

/* RTU, DREP: two comm IDs and private data; DREQ adds the remote QPN. */
struct srn_cm_ids {
	uint32_t local_comm_id, remote_comm_id;
	uint32_t qpn;                  /* DREQ only, 24 bits */
	uint8_t pdata[SRN_CM_RTU_PDATA];
};

/* SIDR_REQ (IBTA Table 114): which service, from whom (request ID). */
struct srn_cm_sidr_req {
	uint32_t request_id;
	uint16_t pkey;
	uint64_t service_id;
	uint8_t pdata[SRN_CM_SIDR_REQ_PDATA];
};

/* SIDR_REP (IBTA Table 115): the service's QP and Q_Key, or why not. */
struct srn_cm_sidr_rep {
	uint32_t request_id;
	uint8_t status;                /* enum srn_cm_sidr_status */
	uint8_t info_len;              /* <= 72 */
	uint32_t qpn;                  /* 24 bits */
	uint64_t service_id;
	uint32_t qkey;
	uint8_t info[SRN_CM_SIDR_REP_INFO];   /* ClassPortInfo on a redirect */
	uint8_t pdata[SRN_CM_SIDR_REP_PDATA];
};

struct srn_cm_msg {
	uint16_t attr;                 /* enum srn_cm_attr */
	uint64_t tid;
	union {
		struct srn_cm_req req;
		struct srn_cm_rep rep;
		struct srn_cm_rej rej;
		struct srn_cm_mra mra;
		struct srn_cm_ids ids;     /* RTU, DREQ, DREP */
		struct srn_cm_sidr_req sidr_req;
		struct srn_cm_sidr_rep sidr_rep;
	};
};

/* Why the parser refused a MAD (one counter each). */
enum srn_cm_bad {
	SRN_CM_BAD_LEN = 1,            /* not 256 bytes */
	SRN_CM_BAD_VERSION,            /* base or class version */
	SRN_CM_BAD_CLASS,              /* not the CM class */
	SRN_CM_BAD_METHOD,             /* not Send */
	SRN_CM_BAD_STATUS,             /* a request with a status */
	SRN_CM_BAD_ATTR,               /* attribute we do not take */
	SRN_CM_BAD_FIELD,              /* a field out of its range */
	SRN_CM_BAD_MAX
};

/* Check every header field and the message's fields; fill *m.  0, or
 * -enum srn_cm_bad.  Nothing in m is trusted unless this returned 0. */
int srn_cm_mad_parse(const uint8_t *mad, size_t len, struct srn_cm_msg *m);
/* Write a 256-byte MAD for m (attr and tid set).  -EINVAL for an attribute
 * this does not build. */
int srn_cm_mad_build(const struct srn_cm_msg *m, uint8_t mad[SRN_MAD_LEN]);
/* How much private data the message for attr carries (0: none/unknown). */
size_t srn_cm_pdata_len(uint16_t attr);
const char *srn_cm_attr_name(uint16_t attr);

/* The RDMA IP CM service (IBTA Annex A11): service IDs are
 * 0x0000000001 << 24 | port space << 16 | port, and the first 36 bytes of a
 * REQ's private data say who connects to whom. */
#define SRN_CMA_HDR_LEN 36
#define SRN_CMA_VERSION 0x00
#define SRN_CMA_SID_PREFIX_MASK 0xFFFFFFFFFF000000ull
#define SRN_CMA_SID_PREFIX 0x0000000001000000ull

static inline uint64_t srn_cma_service_id(uint16_t ps, uint16_t port)
{
	return (uint64_t)ps << 16 | port;
}

struct srn_cma_hdr {
	uint16_t src_port;             /* the active side's port */
	struct sockaddr_storage src, dst;   /* ports filled in: src's, and the SID's */
};
/* Parse the header in a REQ's private data; dst_port comes from the
 * service ID.  0 or -EINVAL (wrong version, IP version, or an IPv4 address
 * in an IPv6 layout). */
int srn_cma_hdr_parse(const uint8_t *pdata, size_t len, uint16_t dst_port, struct srn_cma_hdr *h);
/* Write it: src/dst are AF_INET or AF_INET6 of the same family. */
int srn_cma_hdr_build(uint8_t out[SRN_CMA_HDR_LEN], const struct sockaddr *src,
		      const struct sockaddr *dst);

#endif
