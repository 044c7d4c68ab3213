/*
 * admin.c - admin commands: Identify, Get/Set Features, Get Log Page,
 * Asynchronous Event Request, Keep Alive.
 *
 * Identify offers CNS 0 (namespace), 1 (controller), 2 (active NS list),
 * 3 (NS descriptors) and 6 (NVM command set controller data, all zero).
 * Data structures are built in the caller's C2H buffer at the offsets of
 * NVMe Base 2.0 (Identify: 5.17.2; logs: 5.16.1) through the put_*
 * helpers; the buffer's length (the host's SGL) was checked first, so a
 * short SGL is answered with Data SGL Length Invalid, never overrun.
 * Everything here runs with the target's lock held (core.c).
 */
#include "core.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put16(uint8_t *b, unsigned off, uint16_t v) { memcpy(b + off, &v, 2); }
static void put32(uint8_t *b, unsigned off, uint32_t v) { memcpy(b + off, &v, 4); }
static void put64(uint8_t *b, unsigned off, uint64_t v) { memcpy(b + off, &v, 8); }

/* ASCII fields are space padded, not NUL terminated. */
static void put_str(uint8_t *b, unsigned off, unsigned len, const char *s)
{
	size_t n = strlen(s);
	memset(b + off, ' ', len);
	memcpy(b + off, s, n < len ? n : len);
}

static void identify_ctrl(struct nvmf_ctrl *c, uint8_t *b)
{
	const struct nvmf_subsys *s = c->ss;
	put_str(b, 4, 20, s->sn);
	put_str(b, 24, 40, "softrnic-nvmf");
	put_str(b, 64, 8, "0.1");
	b[72] = 6;                        /* RAB */
	b[77] = NVMF_MDTS;
	put16(b, 78, c->cntlid);
	put32(b, 80, 0x00010300);         /* VER 1.3, as the VS property says */
	b[111] = s->discovery ? 2 : 1;    /* CNTRLTYPE: discovery or I/O */
	b[258] = 3;                       /* ACL */
	b[259] = NVMF_AERL;
	b[260] = 1 << 1 | 1;              /* FRMW: one read-only slot */
	b[261] = 1 << 2;                  /* LPA: extended Get Log Page data */
	put16(b, 320, 10);                /* KAS: 100 ms units, 1 s granularity */
	b[512] = 0x66;                    /* SQES: 64 bytes */
	b[513] = 0x44;                    /* CQES: 16 bytes */
	put16(b, 514, NVMF_MQES + 1);     /* MAXCMD */
	uint32_t nn = 0;
	for (unsigned i = 0; i < s->nns; i++)
		nn = s->ns[i].nsid > nn ? s->ns[i].nsid : nn;
	put32(b, 516, nn);
	put16(b, 520, 1 << 2 | 1 << 3);   /* ONCS: Dataset Management, Write Zeroes */
	b[525] = 1;                       /* VWC present: Flush means something */
	/* SGLS: SGLs, keyed data blocks, address as offset (in-capsule data) */
	put32(b, 536, 1u | 1u << 2 | 1u << 20);
	memcpy(b + 768, s->nqn, strlen(s->nqn));
	if (!s->discovery) {
		put32(b, 1792, NVMF_IOCCSZ);
		put32(b, 1796, 1);        /* IORCSZ: a CQE, no data */
		b[1803] = 1;              /* MSDBD */
	}
}

static uint16_t identify_ns(struct nvmf_ctrl *c, uint32_t nsid, uint8_t *b)
{
	const struct nvmf_ns *ns = nvmf_ns_find(c->ss, nsid);
	if (!ns)
		return ST_INVALID_NS | ST_DNR;
	put64(b, 0, ns->nlb);   /* NSZE */
	put64(b, 8, ns->nlb);   /* NCAP */
	put64(b, 16, ns->nlb);  /* NUSE */
	b[33] = 1u << 3 | 1;    /* DLFEAT: deallocated reads zeros; WZ may deallocate */
	memcpy(b + 104, ns->nguid, 16);
	b[130] = NVMF_LBA_SHIFT; /* LBAF0.LBADS */
	return ST_OK;
}

static uint16_t active_ns_list(struct nvmf_ctrl *c, uint32_t after, uint8_t *b)
{
	if (after >= 0xfffffffe)
		return ST_INVALID_NS | ST_DNR;
	unsigned n = 0;
	/* Ascending; subsystems hold few namespaces, so pick by scanning. */
	uint32_t last = after;
	for (;;) {
		uint32_t next = 0;
		for (unsigned i = 0; i < c->ss->nns; i++) {
			uint32_t id = c->ss->ns[i].nsid;
			if (id > last && (!next || id < next))
				next = id;
		}
		if (!next || n == 1024)
			break;
		put32(b, 4 * n++, next);
		last = next;
	}
	return ST_OK;
}

static uint16_t ns_descriptors(struct nvmf_ctrl *c, uint32_t nsid, uint8_t *b)
{
	const struct nvmf_ns *ns = nvmf_ns_find(c->ss, nsid);
	if (!ns)
		return ST_INVALID_NS | ST_DNR;
	b[0] = 2;   /* NIDT: NGUID */
	b[1] = 16;
	memcpy(b + 4, ns->nguid, 16);
	b[20] = 4;  /* NIDT: command set identifier */
	b[21] = 1;
	b[24] = 0;  /* NVM */
	return ST_OK;
}

static uint16_t identify(struct nvmf_ctrl *c, struct nvmf_req *r)
{
	if (r->len < 4096)
		return ST_SGL_LEN_INVALID | ST_DNR;
	memset(r->data, 0, 4096);
	r->xfer = 4096;
	uint8_t cns = r->sqe.cdw10 & 0xff;
	if (c->ss->discovery && cns != 1)
		return ST_INVALID_FIELD | ST_DNR;
	switch (cns) {
	case 0: return identify_ns(c, r->sqe.nsid, r->data);
	case 1: identify_ctrl(c, r->data); return ST_OK;
	case 2: return active_ns_list(c, r->sqe.nsid, r->data);
	case 3: return ns_descriptors(c, r->sqe.nsid, r->data);
	case 6:
		/* I/O command set specific controller data, NVM (CSI 0): no
		 * size limits to report (hosts ask for it from version 1.1). */
		return (r->sqe.cdw11 >> 24) == 0 ? ST_OK : ST_INVALID_FIELD | ST_DNR;
	default: return ST_INVALID_FIELD | ST_DNR;
	}
}

/* ---- features (Base 5.21.1) ---- */

static uint16_t get_features(struct nvmf_ctrl *c, struct nvmf_req *r)
{
	switch (r->sqe.cdw10 & 0xff) {
	case FEAT_NUM_QUEUES: r->cqe.dw0 = (c->nioq - 1u) | (c->nioq - 1u) << 16; break;
	case FEAT_KATO: r->cqe.dw0 = c->kato; break;
	case FEAT_ASYNC_EVENT: r->cqe.dw0 = c->aec; break;
	case FEAT_VWC: r->cqe.dw0 = 1; break;
	default: return ST_INVALID_FIELD | ST_DNR;
	}
	return ST_OK;
}

static uint16_t set_features(struct nvmf_ctrl *c, struct nvmf_req *r)
{
	uint32_t v = r->sqe.cdw11;
	if (r->sqe.cdw10 >> 31)
		return ST_FEAT_NOT_SAVEABLE | ST_DNR;
	switch (r->sqe.cdw10 & 0xff) {
	case FEAT_NUM_QUEUES: {
		if (c->ss->discovery)
			return ST_INVALID_FIELD | ST_DNR;
		uint32_t nsq = v & 0xffff, ncq = v >> 16;
		if (nsq == 0xffff || ncq == 0xffff)
			return ST_INVALID_FIELD | ST_DNR; /* 65536 queues: reserved */
		for (unsigned i = 1; i <= NVMF_MAX_QUEUES; i++)
			if (c->q[i])
				return ST_CMD_SEQ_ERROR; /* only before I/O queues exist */
		uint32_t want = (nsq > ncq ? nsq : ncq) + 1;
		c->nioq = (uint16_t)(want < NVMF_MAX_QUEUES ? want : NVMF_MAX_QUEUES);
		r->cqe.dw0 = (c->nioq - 1u) | (c->nioq - 1u) << 16;
		return ST_OK;
	}
	case FEAT_KATO:
		c->kato = v;
		c->ka_check_ns = c->t->now_ns + (uint64_t)v * 1000000ull;
		return ST_OK;
	case FEAT_ASYNC_EVENT: c->aec = v; return ST_OK;
	case FEAT_VWC: return ST_OK; /* Flush always reaches the file */
	default: return ST_INVALID_FIELD | ST_DNR;
	}
}

/* ---- log pages (Base 5.16) ---- */

static void disc_entry(struct nvmf_disc_entry *e, const struct nvmf_port *p,
		       const struct nvmf_subsys *s, uint16_t portid)
{
	memset(e, 0, sizeof(*e));
	e->trtype = p->trtype;
	e->adrfam = 1;                 /* IPv4 */
	e->subtype = 2;                /* an NVM subsystem */
	e->treq = 1 << 1;              /* secure channel not required */
	e->portid = portid;
	e->cntlid = 0xffff;            /* dynamic controllers */
	e->asqsz = NVMF_AQ_MIN;
	snprintf(e->trsvcid, sizeof(e->trsvcid), "%s", p->trsvcid);
	snprintf(e->subnqn, sizeof(e->subnqn), "%s", s->nqn);
	snprintf(e->traddr, sizeof(e->traddr), "%s", p->traddr);
	if (p->trtype == TRTYPE_RDMA) {
		e->tsas[0] = 1;        /* RDMA_QPTYPE: reliable connected */
		e->tsas[1] = 1;        /* RDMA_PRTYPE: not specified */
		e->tsas[2] = 1;        /* RDMA_CMS: rdma_cm */
	}
}

/* The discovery log: one entry per (port, subsystem this host may use). */
static uint8_t *discovery_log(struct nvmf_ctrl *c, size_t *len)
{
	struct nvmf_tgt *t = c->t;
	size_t max = 1024 + (size_t)t->nports * t->nss * 1024;
	uint8_t *b = calloc(1, max);
	if (!b)
		return NULL;
	uint64_t n = 0;
	for (unsigned p = 0; p < t->nports; p++)
		for (unsigned i = 1; i <= t->nss; i++) {
			const struct nvmf_subsys *s = &t->ss[i];
			bool ok = s->allow_any;
			for (unsigned k = 0; k < s->nallow && !ok; k++)
				ok = !strcmp(s->allow[k], c->hostnqn);
			if (ok)
				disc_entry((void *)(b + 1024 + n++ * 1024), &t->ports[p], s,
					   (uint16_t)(p + 1));
		}
	put64(b, 0, 1); /* GENCTR: the configuration never changes while running */
	put64(b, 8, n);
	*len = 1024 + n * 1024;
	return b;
}

/* One counter summed over the threads' slots (each written by its own
 * thread with atomic adds). */
static uint64_t stat_sum(const struct nvmf_tgt *t, size_t off)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < NVMF_MAX_THREADS; i++)
		v += __atomic_load_n((const uint64_t *)((const char *)&t->stats[i] + off),
				     __ATOMIC_RELAXED);
	return v;
}

static uint8_t *smart_log(struct nvmf_ctrl *c, size_t *len)
{
	uint8_t *b = calloc(1, 512);
	if (!b)
		return NULL;
	const struct nvmf_tgt *t = c->t;
	put16(b, 1, 273 + 25);  /* composite temperature, kelvin */
	b[3] = 100;             /* available spare */
	b[4] = 10;              /* threshold */
	/* data units in thousands of 512-byte units, rounded up (5.16.1.3) */
	put64(b, 32, (stat_sum(t, offsetof(struct nvmf_stats, rd_units)) + 999) / 1000);
	put64(b, 48, (stat_sum(t, offsetof(struct nvmf_stats, wr_units)) + 999) / 1000);
	put64(b, 64, stat_sum(t, offsetof(struct nvmf_stats, rd_cmds)));
	put64(b, 80, stat_sum(t, offsetof(struct nvmf_stats, wr_cmds)));
	*len = 512;
	return b;
}

static uint16_t get_log(struct nvmf_ctrl *c, struct nvmf_req *r)
{
	uint8_t lid = r->sqe.cdw10 & 0xff;
	uint64_t numd = ((uint64_t)(r->sqe.cdw11 & 0xffff) << 16 | r->sqe.cdw10 >> 16) + 1;
	uint64_t off = r->sqe.cdw12 | (uint64_t)r->sqe.cdw13 << 32;
	if (numd * 4 > r->len)
		return ST_SGL_LEN_INVALID | ST_DNR;
	if (off & 3)
		return ST_INVALID_FIELD | ST_DNR; /* LPOL is dword aligned */
	size_t len = 0;
	uint8_t *page = NULL;
	if (lid == LOG_DISCOVERY && c->ss->discovery)
		page = discovery_log(c, &len);
	else if (lid == LOG_SMART && !c->ss->discovery)
		page = smart_log(c, &len);
	else if (lid == LOG_ERROR)
		page = calloc(1, len = 64); /* one entry (ELPE 0), never an error kept */
	else
		return ST_INVALID_LOG | ST_DNR;
	if (!page)
		return ST_INTERNAL;
	uint16_t st = ST_OK;
	if (off > len) {
		st = ST_INVALID_FIELD | ST_DNR;
	} else {
		size_t n = numd * 4, have = len - off;
		memset(r->data, 0, n);
		memcpy(r->data, page + off, have < n ? have : n);
		r->xfer = (uint32_t)n;
	}
	free(page);
	return st;
}

uint16_t nvmf_admin(struct nvmf_ctrl *c, struct nvmf_req *r, int *held)
{
	switch (r->sqe.opc) {
	case OPC_IDENTIFY: return identify(c, r);
	case OPC_GET_FEAT: return get_features(c, r);
	case OPC_SET_FEAT: return set_features(c, r);
	case OPC_GET_LOG: return get_log(c, r);
	case OPC_KEEP_ALIVE: return ST_OK;
	case OPC_AER:
		if (c->naer > NVMF_AERL)
			return ST_AER_LIMIT | ST_DNR;
		/* Held: no event is ever raised, so it completes only by the
		 * queue going away (the host expects that). */
		c->naer++;
		*held = 1;
		return ST_OK;
	default: return ST_INVALID_OPCODE | ST_DNR;
	}
}
