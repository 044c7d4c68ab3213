/*
 * nvme.h - every on-wire structure softrnic-nvmf speaks: the NVMe
 * submission and completion entries, SGL descriptors, the Fabrics Connect
 * data, the NVMe/RDMA rdma_cm private data and the NVMe/TCP PDU headers.
 *
 * All NVMe fields are little-endian (NVMe Base 2.0, 1.4.2); the program
 * runs on little-endian hosts only (a static assert below), so the
 * structures are read in place after a length check, and multi-byte
 * fields go through le16/le32/le64 where they are filled.  Offsets and
 * sizes are the specification's, pinned by _Static_assert.
 */
#ifndef NVMF_NVME_H
#define NVMF_NVME_H

#include <stddef.h>
#include <stdint.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "NVMe fields are read in place");

/* ---- limits this target offers (CAP, Identify, the transports) ---- */
#define NVMF_LBA_SHIFT 9                 /* 512-byte LBAs */
#define NVMF_LBA_SIZE (1u << NVMF_LBA_SHIFT)
#define NVMF_MQES 127                    /* CAP.MQES: 128 entries, 0's based */
#define NVMF_AQ_MIN 32                   /* the admin queue is at least 32 deep */
#define NVMF_MDTS 3                      /* 2^3 x 4 KiB = 32 KiB per command */
#define NVMF_MAX_DATA (4096u << NVMF_MDTS)
#define NVMF_INCAP 8192u                 /* in-capsule data: NVMe/TCP's admin minimum */
#define NVMF_IOCCSZ ((64 + NVMF_INCAP) / 16) /* Identify IOCCSZ, 16-byte units */
#define NVMF_MAX_QUEUES 16               /* I/O queues per controller */
#define NVMF_AERL 3                      /* 4 outstanding AERs, 0's based */
#define NVMF_PORT 4420
#define NVMF_NQN_LEN 223                 /* NQNs are at most 223 bytes */
#define NVMF_DISC_NQN "nqn.2014-08.org.nvmexpress.discovery"

/* ---- submission queue entry (NVMe Base 4.2) ---- */
struct nvme_sgl {
	uint64_t addr;   /* address, or offset into the capsule (subtype 1) */
	uint8_t len[3];  /* keyed: 24-bit length, then the key */
	uint8_t key[4];
	uint8_t type;    /* descriptor type << 4 | subtype */
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_sgl) == 16, "SGL descriptor is 16 bytes");

/* SGL descriptor type/subtype bytes (NVMe Base 4.3.2, NVMe-oF 2.3) */
#define SGL_DATA_OFFSET 0x01   /* data block, address is a capsule offset */
#define SGL_KEYED_ADDR 0x40    /* keyed data block (RDMA) */
#define SGL_KEYED_INV 0x4f     /* keyed, and invalidate the key after */
#define SGL_TRANSPORT 0x5a     /* transport data block (NVMe/TCP: R2T/C2H) */

struct nvme_sqe {
	uint8_t opc;
	uint8_t flags;  /* bits 7:6 PSDT: 01b or 10b (SGL) on fabrics */
	uint16_t cid;
	uint32_t nsid;  /* fabrics commands: byte 4 is FCTYPE */
	uint32_t cdw2, cdw3;
	uint64_t mptr;
	struct nvme_sgl sgl;
	uint32_t cdw10, cdw11, cdw12, cdw13, cdw14, cdw15;
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_sqe) == 64, "SQE is 64 bytes");
_Static_assert(offsetof(struct nvme_sqe, sgl) == 24, "DPTR at byte 24");
_Static_assert(offsetof(struct nvme_sqe, cdw10) == 40, "CDW10 at byte 40");

#define SQE_FCTYPE(s) (((const uint8_t *)(s))[4])
#define SQE_PSDT(s) ((s)->flags >> 6)

struct nvme_cqe {
	uint32_t dw0, dw1;
	uint16_t sqhd, sqid, cid;
	uint16_t status; /* bit 0 phase (0 on fabrics), 8:1 SC, 11:9 SCT, 15 DNR */
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_cqe) == 16, "CQE is 16 bytes");

/* status = SCT << 8 | SC, shifted into place by nvmf_status() */
#define SCT_GENERIC 0x000
#define SCT_CMD 0x100
#define ST_OK 0x00
#define ST_INVALID_OPCODE 0x01
#define ST_INVALID_FIELD 0x02
#define ST_DATA_XFER_ERROR 0x04
#define ST_INTERNAL 0x06
#define ST_INVALID_NS 0x0b
#define ST_CMD_SEQ_ERROR 0x0c
#define ST_SGL_LEN_INVALID 0x0f
#define ST_SGL_TYPE_INVALID 0x11
#define ST_SGL_OFFSET_INVALID 0x16
#define ST_KA_EXPIRED 0x19
#define ST_KA_INVALID 0x1a
#define ST_TRANSIENT_XPORT 0x22
#define ST_LBA_RANGE 0x80
/* command specific (SCT 1) */
#define ST_INVALID_QID (SCT_CMD | 0x01)
#define ST_AER_LIMIT (SCT_CMD | 0x05)
#define ST_INVALID_LOG (SCT_CMD | 0x09)
#define ST_FEAT_NOT_SAVEABLE (SCT_CMD | 0x0d)
#define ST_CONNECT_FORMAT (SCT_CMD | 0x80)
#define ST_CONNECT_BUSY (SCT_CMD | 0x81)
#define ST_CONNECT_INVALID (SCT_CMD | 0x82)
#define ST_CONNECT_HOST (SCT_CMD | 0x84)
#define ST_DNR 0x4000 /* do not retry: in the pre-shift value */

/* opcodes */
#define OPC_FABRICS 0x7f
#define FCT_PROP_SET 0x00
#define FCT_CONNECT 0x01
#define FCT_PROP_GET 0x04
#define FCT_DISCONNECT 0x08
#define OPC_GET_LOG 0x02
#define OPC_IDENTIFY 0x06
#define OPC_SET_FEAT 0x09
#define OPC_GET_FEAT 0x0a
#define OPC_AER 0x0c
#define OPC_KEEP_ALIVE 0x18
#define OPC_FLUSH 0x00
#define OPC_WRITE 0x01
#define OPC_READ 0x02
#define OPC_WRITE_ZEROES 0x08
#define OPC_DSM 0x09

/* data direction from opcode (or FCTYPE) bits 1:0 (NVMe Base 5/6) */
enum nvme_dir { DIR_NONE = 0, DIR_H2C = 1, DIR_C2H = 2, DIR_BIDI = 3 };

/* properties (NVMe-oF 3.5 / Base 3.1.4) */
#define PROP_CAP 0x00
#define PROP_VS 0x08
#define PROP_CC 0x14
#define PROP_CSTS 0x1c
#define CC_EN 0x1u
#define CC_SHN_MASK (3u << 14)
#define CSTS_RDY 0x1u
#define CSTS_SHST_DONE (2u << 2)

/* features and log pages */
#define FEAT_VWC 0x06
#define FEAT_NUM_QUEUES 0x07
#define FEAT_ASYNC_EVENT 0x0b
#define FEAT_KATO 0x0f
#define LOG_ERROR 0x01
#define LOG_SMART 0x02
#define LOG_DISCOVERY 0x70

/* ---- Fabrics Connect (NVMe-oF 3.3) ---- */
struct nvmf_connect_data {
	uint8_t hostid[16];
	uint16_t cntlid;
	uint8_t rsvd[238];
	char subnqn[256];
	char hostnqn[256];
	uint8_t rsvd2[256];
} __attribute__((packed));
_Static_assert(sizeof(struct nvmf_connect_data) == 1024, "Connect data is 1 KiB");
_Static_assert(offsetof(struct nvmf_connect_data, subnqn) == 256, "SUBNQN at 256");
_Static_assert(offsetof(struct nvmf_connect_data, hostnqn) == 512, "HOSTNQN at 512");
/* Connect SQE: CDW10 = RECFMT | QID << 16; CDW11 = SQSIZE | CATTR << 16; CDW12 = KATO */
#define CONNECT_IPO_QID 42     /* byte offsets for Connect Invalid Parameters */
#define CONNECT_IPO_SQSIZE 44
#define CONNECT_IPO_CNTLID 16  /* in the data */
#define CONNECT_IPO_SUBNQN 256
#define CONNECT_IPO_HOSTNQN 512

/* ---- discovery log (NVMe-oF 5.3) ---- */
struct nvmf_disc_entry {
	uint8_t trtype, adrfam, subtype, treq;
	uint16_t portid, cntlid, asqsz;
	uint8_t rsvd[22];
	char trsvcid[32];
	uint8_t rsvd2[192];
	char subnqn[256];
	char traddr[256];
	uint8_t tsas[256];
} __attribute__((packed));
_Static_assert(sizeof(struct nvmf_disc_entry) == 1024, "discovery entry is 1 KiB");
_Static_assert(offsetof(struct nvmf_disc_entry, trsvcid) == 32, "TRSVCID at 32");
_Static_assert(offsetof(struct nvmf_disc_entry, traddr) == 512, "TRADDR at 512");
#define TRTYPE_RDMA 1
#define TRTYPE_TCP 3

/* ---- NVMe/RDMA rdma_cm private data (NVMe-oF 1.1, 7.3.2) ---- */
struct nvme_rdma_cm_req {
	uint16_t recfmt; /* 0 */
	uint16_t qid;
	uint16_t hrqsize; /* host receive queue size, 1's based */
	uint16_t hsqsize; /* host send queue size, 0's based */
	uint16_t cntlid;
	uint8_t rsvd[22];
} __attribute__((packed));
struct nvme_rdma_cm_rep {
	uint16_t recfmt;
	uint16_t crqsize; /* controller receive queue size */
	uint8_t rsvd[28];
} __attribute__((packed));
struct nvme_rdma_cm_rej {
	uint16_t recfmt;
	uint16_t sts;
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_rdma_cm_req) == 32, "CM REQUEST private data");
_Static_assert(sizeof(struct nvme_rdma_cm_rep) == 32, "CM ACCEPT private data");
_Static_assert(sizeof(struct nvme_rdma_cm_rej) == 4, "CM REJECT private data");
enum nvme_rdma_cm_sts {
	CM_REJ_INVALID_LEN = 1,
	CM_REJ_INVALID_RECFMT = 2,
	CM_REJ_INVALID_QID = 3,
	CM_REJ_INVALID_HSQSIZE = 4,
	CM_REJ_INVALID_HRQSIZE = 5,
	CM_REJ_NO_RESOURCES = 6,
};

/* ---- NVMe/TCP PDUs (NVMe/TCP 1.0, 3.6) ---- */
struct nvme_tcp_hdr {
	uint8_t type, flags, hlen, pdo;
	uint32_t plen;
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_tcp_hdr) == 8, "PDU common header");
enum nvme_tcp_type {
	TCP_ICREQ = 0x00,
	TCP_ICRESP = 0x01,
	TCP_H2C_TERM = 0x02,
	TCP_C2H_TERM = 0x03,
	TCP_CMD = 0x04,
	TCP_RSP = 0x05,
	TCP_H2C_DATA = 0x06,
	TCP_C2H_DATA = 0x07,
	TCP_R2T = 0x09,
};
#define TCP_F_HDGST 0x01
#define TCP_F_DDGST 0x02
#define TCP_F_LAST 0x04    /* H2C/C2H data: the last PDU of the transfer */
#define TCP_F_SUCCESS 0x08 /* C2H data: no CapsuleResp follows */
#define TCP_DGST_LEN 4
#define TCP_MAX_H2C 131072 /* MAXH2CDATA we announce */

struct nvme_tcp_icreq {
	struct nvme_tcp_hdr h;
	uint16_t pfv;
	uint8_t hpda, dgst; /* dgst bit 0 header, bit 1 data */
	uint32_t maxr2t;
	uint8_t rsvd[112];
} __attribute__((packed));
struct nvme_tcp_icresp {
	struct nvme_tcp_hdr h;
	uint16_t pfv;
	uint8_t cpda, dgst;
	uint32_t maxh2cdata;
	uint8_t rsvd[112];
} __attribute__((packed));
struct nvme_tcp_cmd {
	struct nvme_tcp_hdr h;
	struct nvme_sqe sqe;
} __attribute__((packed));
struct nvme_tcp_rsp {
	struct nvme_tcp_hdr h;
	struct nvme_cqe cqe;
} __attribute__((packed));
struct nvme_tcp_data { /* H2CData, C2HData */
	struct nvme_tcp_hdr h;
	uint16_t cccid, ttag;
	uint32_t datao, datal;
	uint32_t rsvd;
} __attribute__((packed));
struct nvme_tcp_r2t {
	struct nvme_tcp_hdr h;
	uint16_t cccid, ttag;
	uint32_t r2to, r2tl;
	uint32_t rsvd;
} __attribute__((packed));
struct nvme_tcp_term {
	struct nvme_tcp_hdr h;
	uint16_t fes;
	uint32_t fei;
	uint8_t rsvd[10];
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_tcp_icreq) == 128, "ICReq HLEN 128");
_Static_assert(sizeof(struct nvme_tcp_icresp) == 128, "ICResp HLEN 128");
_Static_assert(sizeof(struct nvme_tcp_cmd) == 72, "CapsuleCmd HLEN 72");
_Static_assert(sizeof(struct nvme_tcp_rsp) == 24, "CapsuleResp HLEN 24");
_Static_assert(sizeof(struct nvme_tcp_data) == 24, "H2C/C2HData HLEN 24");
_Static_assert(sizeof(struct nvme_tcp_r2t) == 24, "R2T HLEN 24");
_Static_assert(sizeof(struct nvme_tcp_term) == 24, "TermReq HLEN 24");
/* fatal error status of a termination request (NVMe/TCP 3.6.2.9) */
#define TCP_FES_HDR_FIELD 1
#define TCP_FES_SEQUENCE 2
#define TCP_FES_HDGST 3
#define TCP_FES_RANGE 4
#define TCP_FES_UNSUPPORTED 6

/* ---- decoded forms, from wire.c (the parsers the fuzzers drive) ---- */
enum sgl_kind { SGLK_NONE, SGLK_INCAP, SGLK_KEYED, SGLK_TRANSPORT };
struct sgl_info {
	enum sgl_kind kind;
	uint32_t len;
	uint64_t addr; /* keyed: remote address; in-capsule: offset */
	uint32_t key;
	int invalidate;
};

/* Decode a command's data pointer; incap_len is the data that came with
 * the capsule (0 when the transport has none).  Returns 0 or an NVMe
 * status (ST_*) for the completion. */
int nvmf_sgl_parse(const struct nvme_sqe *sqe, uint32_t incap_len, int keyed_ok,
		   struct sgl_info *out);
enum nvme_dir nvmf_sqe_dir(const struct nvme_sqe *sqe);

/* NVMe/RDMA REQUEST private data: 0 or a CM_REJ_* status. */
int nvmf_cm_req_parse(const void *pdata, size_t len, uint16_t max_qid,
		      struct nvme_rdma_cm_req *out);

/* NVMe/TCP: the header fields of a PDU whose first 8 bytes arrived; for
 * a given direction (host_side: PDUs a host receives) says how many header
 * bytes (with digest) to read and the total plen.  0 or TCP_FES_*. */
struct tcp_pdu_shape {
	uint32_t hlen;  /* header incl. header digest */
	uint32_t pdo;   /* data offset (0: no data) */
	uint32_t dlen;  /* data bytes (without the data digest) */
	uint32_t plen;
	int ddgst;
};
int nvmf_tcp_pdu_check(const struct nvme_tcp_hdr *h, int host_side, int hdgst, int ddgst,
		       struct tcp_pdu_shape *out);

static inline uint16_t nvmf_status(uint16_t st)
{
	/* SC in 8:1, SCT in 11:9, DNR 15: st = [DNR<<14] | SCT<<8 | SC */
	return (uint16_t)(((st & 0x7ff) << 1) | ((st & ST_DNR) << 1));
}

#endif
