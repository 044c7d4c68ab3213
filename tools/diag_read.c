/*
 * diag_read.c - finding, mapping and reading diagnostic segments, and the
 * shared output layer (see diag_read.h).
 *
 * Invariants: a name is opened only after fstatat (not following links)
 * said it is a regular file the caller may read: its own, or anybody's
 * for root; then with O_NOFOLLOW|O_NONBLOCK, and the fd is checked again
 * (same inode, regular).  Nothing is mapped (diag_seg.h).  Cleanup removes
 * only the caller's own regular files of processes that are gone, after
 * checking the name still names the inode it judged.  Every loop is
 * bounded by the number of directory entries.
 */
#include "diag_read.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_SEGMENTS 4096   /* more files than this: the rest are ignored */
#define MAX_ENTRIES 65536   /* directory entries looked at */

const char *srn_diag_dir(void)
{
	const char *d = getenv(SRN_DIAG_DIR_ENV);
	return d && *d ? d : SRN_DIAG_DEFAULT_DIR;
}

static const char *file_type(mode_t m)
{
	return S_ISFIFO(m) ? "a FIFO"
	     : S_ISLNK(m)  ? "a symbolic link"
	     : S_ISDIR(m)  ? "a directory"
	     : S_ISSOCK(m) ? "a socket"
	     : S_ISREG(m)  ? "a regular file"
			   : "a device node";
}

/* Open and load one file the caller may read (st: its fstatat).  0 ok;
 * 1 skip quietly (gone, or being created); -1 unreadable (reason printed
 * unless quiet). */
static int open_one(int dirfd, const char *dir, const char *name, const struct stat *st,
		    struct srn_seg *s, bool quiet)
{
	snprintf(s->path, sizeof(s->path), "%s/%s", dir, name);
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->fd = -1;
	/* O_NONBLOCK: should a FIFO have been swapped in since the fstatat,
	 * opening it does not wait for a writer; the fd says what it is. */
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT)
			return 1;
		if (!quiet)
			fprintf(stderr, "softrnic: %s: %s\n", s->path, strerror(errno));
		return -1;
	}
	struct stat fst;
	const char *why = NULL;
	if (fstat(fd, &fst))
		why = strerror(errno);
	else if (fst.st_ino != st->st_ino || fst.st_dev != st->st_dev || !S_ISREG(fst.st_mode) ||
		 fst.st_uid != st->st_uid)
		why = "replaced while being opened";
	if (why) {
		close(fd);
		if (!quiet)
			fprintf(stderr, "softrnic: %s: %s\n", s->path, why);
		return -1;
	}
	if (fst.st_size == 0) {
		close(fd);
		return 1;   /* being created, not yet sized */
	}
	char msg[160];
	int r = srn_seg_load(s, srn_seg_pread, (void *)(intptr_t)fd, (uint64_t)fst.st_size, msg,
			     sizeof(msg));
	if (!r && s->pid != srn_diag_name_pid(name)) {
		snprintf(msg, sizeof(msg), "written by pid %d, named for another", s->pid);
		r = -1;
	}
	if (r) {
		close(fd);
		if (r < 0 && !quiet)
			fprintf(stderr, "softrnic: %s: %s\n", s->path, msg);
		return r;
	}
	s->fd = fd;
	s->uid = fst.st_uid;
	s->st_dev = fst.st_dev;
	s->st_ino = fst.st_ino;
	s->gone = !srn_diag_proc_alive(s->pid, s->hdr.proc_start_ticks);
	if (s->gone && s->state == SRN_PROC_RUNNING)
		s->state = SRN_PROC_DEAD;
	return 0;
}

static int seg_cmp(const void *a, const void *b)
{
	const struct srn_seg *x = a, *y = b;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return strcmp(x->dev, y->dev);
}

/* Each loaded segment keeps its fd: allow as many as the hard limit. */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int srn_segs_load(struct srn_seg_set *set, const struct srn_seg_filter *f, bool quiet)
{
	memset(set, 0, sizeof(*set));
	set->dirfd = -1;
	const char *dir = srn_diag_dir();
	DIR *dp = opendir(dir);
	if (!dp)
		return -errno;
	set->dirfd = fcntl(dirfd(dp), F_DUPFD_CLOEXEC, 0);
	if (set->dirfd < 0) {
		int e = errno;
		closedir(dp);
		return -e;
	}
	raise_fd_limit();
	uid_t me = geteuid();
	struct dirent *de;
	size_t cap = 0;
	for (unsigned seen = 0; seen < MAX_ENTRIES && set->n < MAX_SEGMENTS && (de = readdir(dp));
	     seen++) {
		int pid = srn_diag_name_pid(de->d_name);
		if (pid < 0 || (f && f->pid && f->pid != pid))
			continue;
		struct stat st;
		if (fstatat(set->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;   /* gone since readdir */
		/* Another user's: not ours to read (root reads all). */
		if (me != 0 && st.st_uid != me) {
			set->others++;
			continue;
		}
		if (!S_ISREG(st.st_mode)) {
			set->unreadable++;
			if (!quiet)
				fprintf(stderr, "softrnic: %s/%s: %s, not a segment: skipped\n", dir,
					de->d_name, file_type(st.st_mode));
			continue;
		}
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
		int r = open_one(set->dirfd, dir, de->d_name, &st, s, quiet);
		if (r < 0)
			set->unreadable++;
		if (r)
			continue;
		if (f && f->dev && strcmp(f->dev, s->dev)) {
			close(s->fd);
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
		if (set->v[i].fd >= 0)
			close(set->v[i].fd);
	if (set->dirfd >= 0)
		close(set->dirfd);
	free(set->v);
	memset(set, 0, sizeof(*set));
	set->dirfd = -1;
}

void srn_segs_note_others(FILE *f, const struct srn_seg_set *set)
{
	if (set->others)
		fprintf(f, "%u segment%s of other users not shown\n", set->others,
			set->others == 1 ? "" : "s");
}

unsigned srn_segs_cleanup(const struct srn_seg_filter *f, bool verbose, unsigned *others)
{
	struct srn_seg_set set;
	unsigned removed = 0;
	if (others)
		*others = 0;
	if (srn_segs_load(&set, f, true))
		return 0;
	if (others)
		*others = set.others;
	uid_t me = geteuid();
	for (size_t i = 0; i < set.n; i++) {
		const struct srn_seg *s = &set.v[i];
		/* Only our own (root too: it reads everybody's, removes its own). */
		if (!s->gone || s->uid != me)
			continue;
		/* Still the file we judged: a regular file of ours, same inode. */
		struct stat st;
		if (fstatat(set.dirfd, s->name, &st, AT_SYMLINK_NOFOLLOW) || st.st_ino != s->st_ino ||
		    st.st_dev != s->st_dev || !S_ISREG(st.st_mode) || st.st_uid != me)
			continue;
		if (unlinkat(set.dirfd, s->name, 0) == 0) {
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
