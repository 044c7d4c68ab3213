/*
 * diag_read.c - finding, mapping and reading diagnostic segments, and the
 * shared output layer (see diag_read.h).
 *
 * Invariants: a segment is another process's memory, so nothing read from
 * it is trusted: the header must carry the magic, layout and sizes this
 * tool was built with, every count read from it is clamped to the
 * compiled maximum, every string is copied and NUL-terminated, every ring
 * index is masked.  Mappings are read-only.  Every loop is bounded by the
 * compiled table sizes or by the number of directory entries.
 */
#include "diag_read.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_SEGMENTS 4096   /* more files than this: the rest are ignored */

const char *srn_diag_dir(void)
{
	const char *d = getenv(SRN_DIAG_DIR_ENV);
	return d && *d ? d : SRN_DIAG_DEFAULT_DIR;
}

uint64_t srn_mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* "softrnic.<pid>.<dev>": the pid, or -1 when the name is not ours. */
static int name_pid(const char *name)
{
	size_t plen = strlen(SRN_DIAG_FILE_PREFIX);
	if (strncmp(name, SRN_DIAG_FILE_PREFIX, plen))
		return -1;
	char *end;
	errno = 0;
	long pid = strtol(name + plen, &end, 10);
	if (errno || end == name + plen || *end != '.' || !end[1] || pid <= 0 || pid > INT_MAX)
		return -1;
	return (int)pid;
}

static bool proc_exists(int pid, uint64_t start_ticks)
{
	if (pid <= 0)
		return false;
	if (kill(pid, 0) && errno == ESRCH)
		return false;
	/* A live process with that pid may be a newer one; a zombie has
	 * died and only waits for its parent. */
	char state = '?';
	uint64_t t = srn_diag_proc_stat(pid, &state);
	if (state == 'Z' || state == 'X')
		return false;
	return !(start_ticks && t && t != start_ticks);
}

static void copy_str(char *dst, size_t dlen, const char *src, size_t slen)
{
	size_t n = strnlen(src, slen < dlen ? slen : dlen - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* Map and validate one file.  0 ok; 1 not (yet) a segment, skip quietly;
 * -1 unreadable (reason printed unless quiet). */
static int map_one(const char *dir, const char *name, struct srn_seg *s, bool quiet)
{
	snprintf(s->path, sizeof(s->path), "%s/%s", dir, name);
	int fd = open(s->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (!quiet && errno != ENOENT)
			fprintf(stderr, "softrnic: %s: %s\n", s->path, strerror(errno));
		return errno == ENOENT ? 1 : -1;
	}
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -1;
	}
	if ((uint64_t)st.st_size < sizeof(struct srn_diag_seg)) {
		close(fd);
		/* Being created (not yet sized), or not a segment of this layout. */
		if (st.st_size == 0)
			return 1;
		if (!quiet)
			fprintf(stderr, "softrnic: %s: %lld bytes, not a softrnic segment of layout %d\n",
				s->path, (long long)st.st_size, SRN_DIAG_LAYOUT);
		return -1;
	}
	void *p = mmap(NULL, sizeof(struct srn_diag_seg), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		if (!quiet)
			fprintf(stderr, "softrnic: %s: mmap: %s\n", s->path, strerror(errno));
		return -1;
	}
	const struct srn_diag_seg *seg = p;
	const struct srn_diag_hdr *h = &seg->hdr;
	/* Pairs with the writer's release store of magic (shm.h). */
	uint64_t magic = atomic_load_explicit(&h->magic, memory_order_acquire);
	const char *why = NULL;
	if (magic == 0)
		why = "";   /* header not written yet */
	else if (magic != SRN_DIAG_MAGIC)
		why = "bad magic";
	else if (h->layout != SRN_DIAG_LAYOUT)
		why = "written by a softrnic with another segment layout";
	else if (h->hdr_size != sizeof(*h) || h->seg_size != sizeof(struct srn_diag_seg) ||
		 h->nslots != SRN_DIAG_SLOTS || h->slot_size != sizeof(struct srn_diag_slot) ||
		 h->log_entries != SRN_DIAG_LOG_ENTRIES ||
		 h->dev_log_entries != SRN_DIAG_DEV_LOG_ENTRIES ||
		 h->entry_size != sizeof(struct srn_diag_log_entry) ||
		 h->log_msg_len != SRN_DIAG_LOG_MSG)
		why = "sizes do not match this tool's layout";
	if (why) {
		munmap(p, sizeof(struct srn_diag_seg));
		if (!*why)
			return 1;
		if (!quiet)
			fprintf(stderr, "softrnic: %s: %s\n", s->path, why);
		return -1;
	}
	s->seg = seg;
	s->pid = h->pid;
	copy_str(s->comm, sizeof(s->comm), h->comm, sizeof(h->comm));
	copy_str(s->dev, sizeof(s->dev), h->devname, sizeof(h->devname));
	copy_str(s->addr, sizeof(s->addr), h->addr, sizeof(h->addr));
	memcpy(s->gid, h->gid, sizeof(s->gid));
	s->start_realtime_ns = h->start_realtime_ns;
	s->start_mono_ns = h->start_mono_ns;
	s->ncounters = h->ncounters < SRN_DIAG_MAX_COUNTERS ? h->ncounters : SRN_DIAG_MAX_COUNTERS;
	s->nqp_counters = h->nqp_counters < SRN_DIAG_MAX_QP_COUNTERS ? h->nqp_counters
								      : SRN_DIAG_MAX_QP_COUNTERS;
	for (uint32_t i = 0; i < s->ncounters; i++)
		copy_str(s->cnames[i], SRN_DIAG_NAME_LEN, seg->counter_names[i], SRN_DIAG_NAME_LEN);
	for (uint32_t i = 0; i < s->nqp_counters; i++)
		copy_str(s->qpcnames[i], SRN_DIAG_NAME_LEN, seg->qp_counter_names[i],
			 SRN_DIAG_NAME_LEN);
	s->gone = !proc_exists(s->pid, h->proc_start_ticks);
	uint32_t closed = atomic_load_explicit(&h->closed, memory_order_acquire);
	s->state = closed == 1 ? SRN_PROC_CLOSED
		 : closed == 2 ? SRN_PROC_EXITED
		 : s->gone     ? SRN_PROC_DEAD
			       : SRN_PROC_RUNNING;
	return 0;
}

static int seg_cmp(const void *a, const void *b)
{
	const struct srn_seg *x = a, *y = b;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return strcmp(x->dev, y->dev);
}

static bool name_passes(const char *name, const struct srn_seg_filter *f)
{
	int pid = name_pid(name);
	if (pid < 0)
		return false;
	return !f || !f->pid || f->pid == pid;
}

int srn_segs_load(struct srn_seg_set *set, const struct srn_seg_filter *f, bool quiet)
{
	memset(set, 0, sizeof(*set));
	const char *dir = srn_diag_dir();
	DIR *dp = opendir(dir);
	if (!dp)
		return -errno;
	struct dirent *de;
	size_t cap = 0;
	while ((de = readdir(dp)) && set->n < MAX_SEGMENTS) {
		if (!name_passes(de->d_name, f))
			continue;
		if (set->n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct srn_seg *v = realloc(set->v, ncap * sizeof(*v));
			if (!v)
				break;
			set->v = v;
			cap = ncap;
		}
		struct srn_seg *s = &set->v[set->n];
		memset(s, 0, sizeof(*s));
		int r = map_one(dir, de->d_name, s, quiet);
		if (r < 0)
			set->unreadable++;
		if (r)
			continue;
		if (f && f->dev && strcmp(f->dev, s->dev)) {
			munmap((void *)s->seg, sizeof(struct srn_diag_seg));
			continue;
		}
		if (s->gone)
			set->stale++;
		set->n++;
	}
	closedir(dp);
	if (set->n)
		qsort(set->v, set->n, sizeof(set->v[0]), seg_cmp);
	return 0;
}

void srn_segs_free(struct srn_seg_set *set)
{
	for (size_t i = 0; i < set->n; i++)
		munmap((void *)set->v[i].seg, sizeof(struct srn_diag_seg));
	free(set->v);
	memset(set, 0, sizeof(*set));
}

unsigned srn_segs_cleanup(const struct srn_seg_filter *f, bool verbose)
{
	struct srn_seg_set set;
	unsigned removed = 0;
	if (srn_segs_load(&set, f, true))
		return 0;
	for (size_t i = 0; i < set.n; i++) {
		const struct srn_seg *s = &set.v[i];
		if (!s->gone)
			continue;
		if (unlink(s->path) == 0) {
			removed++;
			if (verbose)
				printf("removed %s (pid %d %s, %s)\n", s->path, s->pid, s->comm,
				       srn_proc_state_name(s->state));
		} else {
			fprintf(stderr, "softrnic: cannot remove %s: %s\n", s->path, strerror(errno));
		}
	}
	srn_segs_free(&set);
	return removed;
}

const char *srn_proc_state_name(enum srn_proc_state s)
{
	switch (s) {
	case SRN_PROC_RUNNING: return "running";
	case SRN_PROC_CLOSED: return "closed";
	case SRN_PROC_EXITED: return "exited";
	case SRN_PROC_DEAD: return "dead";
	}
	return "?";
}

uint64_t srn_seg_counter(const struct srn_seg *s, uint32_t i)
{
	if (i >= s->ncounters)
		return 0;
	return atomic_load_explicit(&s->seg->counters.v[i], memory_order_relaxed);
}

int srn_seg_slot(const struct srn_seg *s, uint32_t i, struct srn_diag_slot *out)
{
	if (i >= SRN_DIAG_SLOTS)
		return 0;
	const struct srn_diag_slot *src = &s->seg->slots[i];
	/* Cheap pre-check: most slots of a segment were never used. */
	if (__atomic_load_n(&src->kind, __ATOMIC_RELAXED) == SRN_DIAG_FREE &&
	    __atomic_load_n(&src->last_kind, __ATOMIC_RELAXED) == SRN_DIAG_FREE)
		return 0;
	int torn = srn_diag_slot_read(src, out);
	if (out->kind >= SRN_DIAG__KINDS)
		return 0;   /* garbage: not a kind we know */
	if (out->kind == SRN_DIAG_FREE)
		return 0;
	return torn ? -1 : 1;
}

/* Read the entries [head - nent, head) of a ring, oldest first. */
static size_t ring_read(const struct srn_diag_log_entry *ring, _Atomic const uint64_t *headp,
			uint32_t nent, bool check_gen, uint32_t gen, struct srn_diag_log_entry *out,
			size_t max)
{
	/* Pairs with the writer's release store of head (log.c). */
	uint64_t head = atomic_load_explicit(headp, memory_order_acquire);
	uint64_t first = head > nent ? head - nent : 0;
	size_t k = 0;
	for (uint64_t n = first; n < head && k < max; n++) {
		if (srn_diag_entry_read(ring, nent, n, &out[k]))
			continue;   /* overwritten while we read, or torn */
		if (check_gen && out[k].gen != gen)
			continue;   /* a previous occupant's line */
		k++;
	}
	return k;
}

size_t srn_seg_dev_log(const struct srn_seg *s, struct srn_diag_log_entry *out, size_t max)
{
	return ring_read(s->seg->dev_log.e, &s->seg->dev_log.head, SRN_DIAG_DEV_LOG_ENTRIES, false,
			 0, out, max);
}

size_t srn_seg_qp_log(const struct srn_seg *s, uint32_t idx, uint32_t gen,
		      struct srn_diag_log_entry *out, size_t max)
{
	if (idx >= SRN_DIAG_SLOTS)
		return 0;
	const struct srn_diag_qp_log *l = &s->seg->logs[idx];
	return ring_read(l->e, &l->head, SRN_DIAG_LOG_ENTRIES, true, gen, out, max);
}

uint64_t srn_seg_realtime(const struct srn_seg *s, uint64_t mono_ns)
{
	return s->start_realtime_ns + (mono_ns - s->start_mono_ns);
}

const char *srn_kind_name(uint32_t kind)
{
	static const char *const names[SRN_DIAG__KINDS] = {
		[SRN_DIAG_FREE] = "dev", [SRN_DIAG_PD] = "pd",   [SRN_DIAG_MR] = "mr",
		[SRN_DIAG_CQ] = "cq",    [SRN_DIAG_QP] = "qp",   [SRN_DIAG_SRQ] = "srq",
		[SRN_DIAG_AH] = "ah",
	};
	return kind < SRN_DIAG__KINDS ? names[kind] : "?";
}

const char *srn_level_str(uint32_t level)
{
	static const char *const names[] = {
		[SRN_LOG_OFF] = "-", [SRN_LOG_ERROR] = "error", [SRN_LOG_WARN] = "warn",
		[SRN_LOG_INFO] = "info", [SRN_LOG_DEBUG] = "debug",
	};
	return level < sizeof(names) / sizeof(names[0]) ? names[level] : "?";
}

const char *srn_qp_state_str(uint32_t state)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
		[IBV_QPS_RTS] = "RTS",     [IBV_QPS_SQD] = "SQD",   [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};
	return state < sizeof(names) / sizeof(names[0]) && names[state] ? names[state] : "?";
}

const char *srn_qp_type_str(uint32_t type)
{
	switch (type) {
	case IBV_QPT_RC: return "RC";
	case IBV_QPT_UC: return "UC";
	case IBV_QPT_UD: return "UD";
	case IBV_QPT_RAW_PACKET: return "RAW";
	case IBV_QPT_XRC_SEND: return "XRC_SEND";
	case IBV_QPT_XRC_RECV: return "XRC_RECV";
	default: return "?";
	}
}

void srn_access_str(uint32_t access, char *buf, size_t len)
{
	static const struct { uint32_t bit; const char *name; } bits[] = {
		{ IBV_ACCESS_LOCAL_WRITE, "LOCAL_WRITE" },
		{ IBV_ACCESS_REMOTE_WRITE, "REMOTE_WRITE" },
		{ IBV_ACCESS_REMOTE_READ, "REMOTE_READ" },
		{ IBV_ACCESS_REMOTE_ATOMIC, "REMOTE_ATOMIC" },
		{ IBV_ACCESS_MW_BIND, "MW_BIND" },
		{ IBV_ACCESS_ZERO_BASED, "ZERO_BASED" },
		{ IBV_ACCESS_ON_DEMAND, "ON_DEMAND" },
		{ IBV_ACCESS_HUGETLB, "HUGETLB" },
		{ IBV_ACCESS_RELAXED_ORDERING, "RELAXED_ORDERING" },
	};
	size_t off = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]) && off < len; i++)
		if (access & bits[i].bit)
			off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? "|" : "",
						bits[i].name);
	if (!off)
		snprintf(buf, len, "LOCAL_READ");
}

void srn_gid_addr_str(const uint8_t gid[16], char *buf, size_t len)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	if (!memcmp(gid, v4mapped, sizeof(v4mapped)))
		inet_ntop(AF_INET, gid + 12, buf, (socklen_t)len);
	else
		inet_ntop(AF_INET6, gid, buf, (socklen_t)len);
}

void srn_time_str(uint64_t realtime_ns, char *buf, size_t len)
{
	time_t t = (time_t)(realtime_ns / 1000000000ull);
	struct tm tm;
	localtime_r(&t, &tm);
	size_t n = strftime(buf, len, "%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%03u", (unsigned)(realtime_ns / 1000000ull % 1000));
}

int srn_parse_u32(const char *s, uint32_t *out)
{
	if (!s || !*s)
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end || v > UINT32_MAX || s[0] == '-')
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int srn_parse_pid(const char *s, int *out)
{
	uint32_t v;
	if (srn_parse_u32(s, &v) || !v || v > INT32_MAX)
		return -1;
	*out = (int)v;
	return 0;
}

/* ---- output ------------------------------------------------------------ */

void srn_out_init(struct srn_out *o, FILE *f, enum srn_out_mode mode)
{
	memset(o, 0, sizeof(*o));
	o->f = f;
	o->mode = mode;
	o->first[0] = true;
}

void srn_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* JSON: the comma and key before a member. */
static void json_member(struct srn_out *o, const char *key)
{
	if (!o->first[o->depth])
		fputc(',', o->f);
	o->first[o->depth] = false;
	if (key) {
		srn_json_string(o->f, key);
		fputc(':', o->f);
	}
}

static void json_open(struct srn_out *o, const char *key, char c)
{
	if (o->mode != SRN_OUT_JSON)
		return;
	json_member(o, key);
	fputc(c, o->f);
	if (o->depth < 15)
		o->depth++;
	o->first[o->depth] = true;
}

static void json_close(struct srn_out *o, char c)
{
	if (o->mode != SRN_OUT_JSON)
		return;
	fputc(c, o->f);
	if (o->depth > 0)
		o->depth--;
	if (o->depth == 0) {
		fputc('\n', o->f);
		o->first[0] = true;   /* the next document starts afresh */
	}
}

void srn_out_obj_begin(struct srn_out *o, const char *key) { json_open(o, key, '{'); }
void srn_out_obj_end(struct srn_out *o) { json_close(o, '}'); }
void srn_out_arr_begin(struct srn_out *o, const char *key) { json_open(o, key, '['); }
void srn_out_arr_end(struct srn_out *o) { json_close(o, ']'); }

void srn_out_rec_begin(struct srn_out *o, int indent, const char *head)
{
	if (o->mode == SRN_OUT_TABLE)
		fprintf(o->f, "%*s%s", indent, "", head);
	else if (o->mode == SRN_OUT_DUMP)
		fprintf(o->f, "%s%s%s", o->prefix, *o->prefix ? "\t" : "", head);
	o->line_open = o->mode != SRN_OUT_JSON;
}

void srn_out_rec_end(struct srn_out *o)
{
	if (o->line_open)
		fputc('\n', o->f);
	o->line_open = false;
}

/* Table and dump print fields only inside a record; JSON everywhere. */
static void field(struct srn_out *o, const char *key, const char *text, bool quote)
{
	if (o->mode != SRN_OUT_JSON && !o->line_open)
		return;
	switch (o->mode) {
	case SRN_OUT_TABLE:
		fprintf(o->f, "  %s %s", key, text);
		break;
	case SRN_OUT_DUMP:
		fprintf(o->f, "\t%s=%s", key, text);
		break;
	case SRN_OUT_JSON:
		json_member(o, key);
		if (quote)
			srn_json_string(o->f, text);
		else
			fputs(text, o->f);
		break;
	}
}

void srn_out_u64(struct srn_out *o, const char *key, uint64_t v)
{
	char b[24];
	snprintf(b, sizeof(b), "%llu", (unsigned long long)v);
	field(o, key, b, false);
}

void srn_out_hex(struct srn_out *o, const char *key, uint64_t v, int width)
{
	char b[24];
	if (o->mode == SRN_OUT_JSON)
		snprintf(b, sizeof(b), "%llu", (unsigned long long)v);
	else
		snprintf(b, sizeof(b), "0x%0*llx", width, (unsigned long long)v);
	field(o, key, b, false);
}

void srn_out_str(struct srn_out *o, const char *key, const char *v)
{
	field(o, key, v, true);
}

void srn_out_secs(struct srn_out *o, const char *key, double secs)
{
	char b[48];
	snprintf(b, sizeof(b), o->mode == SRN_OUT_TABLE ? "%.1fs" : "%.3f", secs);
	field(o, key, b, false);
}

void srn_out_dbl(struct srn_out *o, const char *key, double v, int prec)
{
	char b[48];
	snprintf(b, sizeof(b), "%.*f", prec, v);
	field(o, key, b, false);
}
