/*
 * explain_dead.c - `softrnic explain` on a process that ended without
 * closing its device or exiting: killed, or crashed.
 *
 * The kernel's log line of a crash ("srn-progress[1234]: segfault at
 * ... in libc.so.6") names the thread but not what it was doing.  The
 * library keeps the operation in progress in the segment (struct
 * srn_diag_busy), and the segment outlives the process, so this says:
 * which thread (srn-progress or an application thread), which QP, which
 * operation, and the address it was moving bytes to or from.  A process
 * killed outside softrnic shows no operation.
 */
#include "explain_dead.h"

#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdatomic.h>

static const char *const stage_text[SRN_DIAG__STAGES] = {
	[SRN_DIAG_STAGE_RESPONDER] = "the responder, executing a peer's request",
	[SRN_DIAG_STAGE_COMPLETER] = "the completer, taking a peer's response",
	[SRN_DIAG_STAGE_REQUESTER] = "the requester, sending a work request",
	[SRN_DIAG_STAGE_DIRECT] = "direct placement into a same-host peer's memory",
};

/* IBTA 9.2 Table 38: the operation in the low five bits of a BTH
 * opcode, the transport in the top three. */
static const char *const bth_op[0x18] = {
	"SEND_FIRST", "SEND_MIDDLE", "SEND_LAST", "SEND_LAST_WITH_IMMEDIATE", "SEND_ONLY",
	"SEND_ONLY_WITH_IMMEDIATE", "RDMA_WRITE_FIRST", "RDMA_WRITE_MIDDLE", "RDMA_WRITE_LAST",
	"RDMA_WRITE_LAST_WITH_IMMEDIATE", "RDMA_WRITE_ONLY", "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
	"RDMA_READ_REQUEST", "RDMA_READ_RESPONSE_FIRST", "RDMA_READ_RESPONSE_MIDDLE",
	"RDMA_READ_RESPONSE_LAST", "RDMA_READ_RESPONSE_ONLY", "ACKNOWLEDGE", "ATOMIC_ACKNOWLEDGE",
	"COMPARE_SWAP", "FETCH_ADD", "RESYNC", "SEND_LAST_WITH_INVALIDATE",
	"SEND_ONLY_WITH_INVALIDATE",
};

static const char *const bth_transport[8] = { "RC", "UC", "RD", "UD", "CNP", "XRC", "?", "?" };

static const char *const wr_op[] = {
	[IBV_WR_RDMA_WRITE] = "RDMA_WRITE", [IBV_WR_RDMA_WRITE_WITH_IMM] = "RDMA_WRITE_WITH_IMM",
	[IBV_WR_SEND] = "SEND", [IBV_WR_SEND_WITH_IMM] = "SEND_WITH_IMM",
	[IBV_WR_RDMA_READ] = "RDMA_READ", [IBV_WR_ATOMIC_CMP_AND_SWP] = "ATOMIC_CMP_AND_SWP",
	[IBV_WR_ATOMIC_FETCH_AND_ADD] = "ATOMIC_FETCH_AND_ADD", [IBV_WR_LOCAL_INV] = "LOCAL_INV",
	[IBV_WR_BIND_MW] = "BIND_MW", [IBV_WR_SEND_WITH_INV] = "SEND_WITH_INV",
};

static void op_name(uint32_t stage, uint32_t op, char *buf, size_t len)
{
	if (stage == SRN_DIAG_STAGE_RESPONDER || stage == SRN_DIAG_STAGE_COMPLETER) {
		uint32_t low = op & 0x1f, t = op >> 5 & 7;
		if (op <= 0xff && low < 0x18)
			snprintf(buf, len, "%s %s", bth_transport[t], bth_op[low]);
		else
			snprintf(buf, len, "opcode 0x%02x", op);
	} else if (op < sizeof(wr_op) / sizeof(wr_op[0]) && wr_op[op]) {
		snprintf(buf, len, "IBV_WR_%s", wr_op[op]);
	} else {
		snprintf(buf, len, "work request opcode %u", op);
	}
}

static void explain_one(FILE *out, const struct srn_seg *s)
{
	const struct srn_diag_busy *b = &s->hdr.busy;
	uint32_t stage = atomic_load_explicit(&b->stage, memory_order_relaxed);
	uint32_t tid = atomic_load_explicit(&b->tid, memory_order_relaxed);
	uint32_t ptid = atomic_load_explicit(&b->progress_tid, memory_order_relaxed);
	fprintf(out, "pid %d (%s) %s ended without closing the device or exiting: killed, "
		"or crashed\n", s->pid, s->comm, s->dev);
	if (stage == SRN_DIAG_STAGE_NONE || stage >= SRN_DIAG__STAGES) {
		fprintf(out, "  no softrnic thread was inside an operation then: the end came "
			"from outside the library\n  (a signal, or a fault in the program's own "
			"code); its srn-progress thread was tid %u\n", ptid);
		return;
	}
	char thread[64], op[64];
	if (tid && tid == ptid)
		snprintf(thread, sizeof(thread), "its srn-progress thread (tid %u)", tid);
	else
		snprintf(thread, sizeof(thread), "an application thread (tid %u)", tid);
	op_name(stage, atomic_load_explicit(&b->opcode, memory_order_relaxed), op, sizeof(op));
	uint64_t va = atomic_load_explicit(&b->va, memory_order_relaxed);
	fprintf(out, "  last inside softrnic: %s, in %s\n", thread, stage_text[stage]);
	fprintf(out, "  QP 0x%06x, %s, PSN 0x%06x, %u bytes", atomic_load(&b->qpn) & 0xffffff,
		op, atomic_load(&b->psn) & 0xffffff, atomic_load(&b->len));
	if (va)
		fprintf(out, ", remote address 0x%" PRIx64, va);
	fprintf(out, "\n  if the kernel logged a fault in that thread (dmesg: \"segfault at\"), "
		"this is the operation;\n  a fault while placing a peer's bytes usually means "
		"registered memory was freed or unmapped\n  while a peer still used its rkey\n");
}

unsigned srn_explain_dead(FILE *out, const struct srn_seg_set *set)
{
	unsigned n = 0;
	for (size_t i = 0; i < set->n; i++) {
		if (set->v[i].state != SRN_PROC_DEAD)
			continue;
		explain_one(out, &set->v[i]);
		n++;
	}
	return n;
}
