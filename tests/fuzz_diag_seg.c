/*
 * fuzz_diag_seg.c - libFuzzer harness for the tools' segment reader
 * (tools/diag_seg.c): srn_seg_load/srn_seg_parse, then every slot, the
 * device log and every QP log, as `softrnic stat/res/explain` read them.
 *
 * A segment is 17 MB, mostly holes, so the input does not spell it out:
 * it is a list of patches applied to a valid segment built here (header,
 * counters and names, a device log, a PD, an MR, a live and a destroyed QP
 * with logs), served through the reader's read function as a sparse file:
 *
 *   [op u8][off u16 le][n u8][n % 16 + 1 bytes]...
 *     op % 6: 0 header, 1 the rest of the fixed part, 2 slots 0-7,
 *             3 QP logs 0-7 (bytes overwrite at off modulo the region);
 *             4 the file shrinks to FIXED + off * 64 bytes after the load;
 *             5 the file has another size (seg_size - off, or +1 when 0)
 *
 * Besides memory safety (the sanitizers), it checks what the tools rely
 * on: counts within the compiled maxima, NUL-terminated strings, known
 * kinds, at most the asked number of log entries, each NUL-terminated.
 *
 * CTest runs it through tests/helpers/fuzz_driver.c (tests/trust_diag.cmake).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "diag/shm.h"   /* the writer's counts: SRN_CNT__MAX, SRN_QPC__MAX */
#include "diag_seg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NSLOTS_T 8                                   /* slots the template fills */
#define A_LEN (SRN_SEG_PREFIX + NSLOTS_T * sizeof(struct srn_diag_slot))
#define B_OFF offsetof(struct srn_diag_seg, logs)
#define B_LEN (NSLOTS_T * sizeof(struct srn_diag_qp_log))

struct image {
	/* Aligned like a segment: the template is built through its structs. */
	uint8_t a[A_LEN] __attribute__((aligned(64)));   /* [0, A_LEN): fixed part, first slots */
	uint8_t b[B_LEN] __attribute__((aligned(64)));   /* [B_OFF, +B_LEN): their logs */
	uint64_t size;           /* the file's size at load */
	uint64_t shrink_to;      /* after the load, when shrink */
	bool shrink, loaded;
};

static struct image tmpl, im;

static ssize_t img_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	struct image *m = ctx;
	uint64_t size = m->loaded && m->shrink ? m->shrink_to : m->size;
	if (off >= size)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	memset(buf, 0, len);    /* holes read as zeros */
	uint64_t end = off + len;
	if (off < A_LEN)
		memcpy(buf, m->a + off, (size_t)((end < A_LEN ? end : A_LEN) - off));
	if (end > B_OFF && off < B_OFF + B_LEN) {
		uint64_t from = off > B_OFF ? off : B_OFF;
		uint64_t to = end < B_OFF + B_LEN ? end : B_OFF + B_LEN;
		memcpy((uint8_t *)buf + (from - off), m->b + (from - B_OFF), (size_t)(to - from));
	}
	return (ssize_t)len;
}

static void put_entry(struct srn_diag_log_entry *e, uint64_t n, uint32_t kind, uint32_t gen,
		      const char *msg)
{
	memset(e, 0, sizeof(*e));
	e->level = SRN_LOG_ERROR;
	e->kind = (uint8_t)kind;
	e->qpn = 0xa001;
	e->gen = gen;
	e->n = n;
	e->ts_ns = 1000 + n;
	snprintf(e->msg, sizeof(e->msg), "%s %llu", msg, (unsigned long long)n);
}

/* A segment as the library writes it (shm.c fill_header, obj_add, log.c). */
static void build_template(void)
{
	static struct srn_diag_seg part;   /* only its fixed part is used */
	memset(&part, 0, sizeof(part.hdr) + sizeof(part.counters));
	struct srn_diag_hdr *h = &part.hdr;
	h->magic = SRN_DIAG_MAGIC;
	srn_diag_hdr_layout(h);
	h->ncounters = SRN_CNT__MAX;
	h->nqp_counters = SRN_QPC__MAX;
	h->pid = 4242;
	h->slots_hwm = NSLOTS_T;
	h->start_mono_ns = 1000;
	memcpy(h->comm, "victim", 7);
	memcpy(h->devname, "fuzzdev", 8);
	memcpy(h->addr, "127.0.0.9", 10);
	for (int i = 0; i < SRN_CNT__MAX; i++) {
		part.counters.v[i] = (uint64_t)i * 3;
		snprintf(part.counter_names[i], SRN_DIAG_NAME_LEN, "c%d", i);
	}
	for (int i = 0; i < SRN_QPC__MAX; i++)
		snprintf(part.qp_counter_names[i], SRN_DIAG_NAME_LEN, "q%d", i);
	part.dev_log.head = 3;
	for (uint64_t n = 0; n < 3; n++)
		put_entry(&part.dev_log.e[n], n, SRN_DIAG_QP, 1, "dev");
	memcpy(tmpl.a, &part, SRN_SEG_PREFIX);

	struct srn_diag_slot *sl = (struct srn_diag_slot *)(void *)(tmpl.a + SRN_SEG_PREFIX);
	static const uint32_t kinds[NSLOTS_T] = { SRN_DIAG_PD, SRN_DIAG_MR, SRN_DIAG_QP,
						  SRN_DIAG_FREE, SRN_DIAG_CQ, SRN_DIAG_SRQ,
						  SRN_DIAG_AH, SRN_DIAG_FREE };
	for (uint32_t i = 0; i < NSLOTS_T; i++) {
		sl[i].seq = 2;
		sl[i].kind = kinds[i];
		sl[i].last_kind = kinds[i] ? kinds[i] : (i == 3 ? SRN_DIAG_QP : SRN_DIAG_FREE);
		sl[i].gen = 1;
		sl[i].handle = 0x1000 + i;
		if (sl[i].last_kind == SRN_DIAG_QP) {
			sl[i].qp.qpn = 0xa001 + i;
			sl[i].qp.state = 3;
		}
	}
	sl[1].mr.length = 4096;
	struct srn_diag_qp_log *logs = (struct srn_diag_qp_log *)(void *)tmpl.b;
	for (uint32_t i = 2; i <= 3; i++) {
		logs[i].head = 20;   /* wrapped: entries 4..19 */
		for (uint64_t n = 4; n < 20; n++)
			put_entry(&logs[i].e[n & (SRN_DIAG_LOG_ENTRIES - 1)], n, SRN_DIAG_QP, 1, "qp");
	}
	tmpl.size = sizeof(struct srn_diag_seg);
}

static void check_str(const char *s, size_t cap)
{
	if (strnlen(s, cap) >= cap)
		abort();
}

static void read_everything(const struct srn_seg *s)
{
	if (s->nslots > SRN_DIAG_SLOTS || s->ncounters > SRN_DIAG_MAX_COUNTERS ||
	    s->nqp_counters > SRN_DIAG_MAX_QP_COUNTERS)
		abort();
	check_str(s->comm, sizeof(s->comm));
	check_str(s->dev, sizeof(s->dev));
	check_str(s->addr, sizeof(s->addr));
	for (uint32_t i = 0; i < s->ncounters; i++)
		check_str(s->cnames[i], SRN_DIAG_NAME_LEN);
	for (uint32_t i = 0; i < s->nqp_counters; i++)
		check_str(s->qpcnames[i], SRN_DIAG_NAME_LEN);
	volatile uint64_t sink = 0;
	for (uint32_t i = 0; i < SRN_DIAG_MAX_COUNTERS + 2; i++)
		sink += srn_seg_counter(s, i);

	struct srn_diag_log_entry e[SRN_DIAG_DEV_LOG_ENTRIES];
	size_t k = srn_seg_dev_log(s, e, 5);   /* fewer than the ring holds */
	if (k > 5)
		abort();
	for (size_t j = 0; j < k; j++)
		check_str(e[j].msg, sizeof(e[j].msg));
	struct srn_diag_slot sl;
	/* Beyond the template's slots every read is a hole: bound the walk
	 * so a patched high-water mark costs little. */
	uint32_t n = s->nslots < 64 ? s->nslots : 64;
	for (uint32_t i = 0; i < n; i++) {
		int r = srn_seg_slot_any(s, i, &sl);
		if (!r)
			continue;
		if (sl.kind >= SRN_DIAG__KINDS || sl.last_kind >= SRN_DIAG__KINDS)
			abort();
		if (srn_seg_slot(s, i, &sl) && sl.kind == SRN_DIAG_FREE)
			abort();
		k = srn_seg_qp_log(s, i, sl.gen, e, SRN_DIAG_LOG_ENTRIES);
		if (k > SRN_DIAG_LOG_ENTRIES)
			abort();
		for (size_t j = 0; j < k; j++)
			check_str(e[j].msg, sizeof(e[j].msg));
	}
	/* Indices past the table are refused, not read. */
	if (srn_seg_slot(s, SRN_DIAG_SLOTS, &sl) || srn_seg_qp_log(s, SRN_DIAG_SLOTS, 0, e, 1))
		abort();
	sink += srn_seg_realtime(s, s->start_mono_ns + 1);
	(void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool built;
	if (!built) {
		build_template();
		built = true;
	}
	memcpy(&im, &tmpl, sizeof(im));
	for (size_t pos = 0; pos + 4 <= size;) {
		uint8_t op = data[pos] % 6;
		uint16_t off = (uint16_t)(data[pos + 1] | data[pos + 2] << 8);
		size_t n = data[pos + 3] % 16 + 1;
		pos += 4;
		if (n > size - pos)
			n = size - pos;
		const uint8_t *bytes = data + pos;
		pos += n;
		uint8_t *dst = NULL;
		size_t region = 0;
		switch (op) {
		case 0: dst = im.a; region = sizeof(struct srn_diag_hdr); break;
		case 1: dst = im.a; region = SRN_SEG_PREFIX; break;
		case 2:
			dst = im.a + SRN_SEG_PREFIX;
			region = A_LEN - SRN_SEG_PREFIX;
			break;
		case 3: dst = im.b; region = B_LEN; break;
		case 4:
			im.shrink = true;
			im.shrink_to = SRN_SEG_PREFIX + (uint64_t)off * 64;
			continue;
		default:
			im.size = off ? sizeof(struct srn_diag_seg) - off : sizeof(struct srn_diag_seg) + 1;
			continue;
		}
		size_t at = off % region;
		if (n > region - at)
			n = region - at;
		memcpy(dst + at, bytes, n);
	}
	struct srn_seg *s = calloc(1, sizeof(*s));
	if (!s)
		return 0;
	char why[160];
	int r = srn_seg_load(s, img_read, &im, im.size, why, sizeof(why));
	if (r < -1 || r > 1)
		abort();
	check_str(why, sizeof(why));
	if (size == 0 && r != 0)
		abort();   /* the template itself must load, or nothing is fuzzed */
	if (r == 0) {
		im.loaded = true;
		read_everything(s);
	}
	free(s);
	return 0;
}
