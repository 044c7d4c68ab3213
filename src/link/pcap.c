/* The pcap writer behind SOFTRNIC_PCAP (format and header choices in
 * pcap.h).
 *
 * Invariants:
 * - The file always holds the 24-byte global header followed by whole
 *   records, except for a torn last record if the process dies inside a
 *   write(); readers report that and keep the rest.
 * - buf holds records not yet written; oldest_ns is the monotonic time the
 *   first of them was taken (0 when buf is empty) and deadline mirrors
 *   oldest_ns + SRN_PCAP_FLUSH_NS for lock-free readers.
 * - written + used never exceeds max_bytes: a record that would pass it is
 *   counted in lost instead, and the file stays a valid pcap.
 * - Writers are shared per expanded path through a registry under
 *   reg_lock, which is taken before a writer's own lock, never after.
 */
#include "link/pcap.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "diag/memcheck.h"
#include "wire/icrc.h"

#define PCAP_MAGIC_US 0xa1b2c3d4u   /* microsecond timestamps, written in host order */
#define LINKTYPE_ETHERNET 1
#define PCAP_BUF (256u << 10)       /* several 64 KiB datagrams per write() */
#define PCAP_MAX_MB_LIMIT (1u << 22) /* 4 TiB: anything larger is a typo */
#define IPPROTO_UDP_NUM 17
#define TTL_DEFAULT 64

struct srn_pcap {
	struct srn_pcap *next;          /* registry */
	unsigned refs;                  /* under reg_lock */
	char path[PATH_MAX];
	int fd;
	pthread_mutex_t lock;
	uint8_t *buf;
	size_t used;
	uint64_t oldest_ns;
	_Atomic uint64_t deadline;
	uint64_t written, max_bytes;
	_Atomic uint64_t lost;
	bool failed;                    /* a write failed: stop writing */
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srn_pcap *reg_head;

/* ---- headers ----------------------------------------------------------- */

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void mac_of(uint8_t mac[6], const struct sockaddr *sa)
{
	mac[0] = 0x02;                  /* locally administered, unicast */
	mac[1] = 0x00;
	if (sa->sa_family == AF_INET)
		memcpy(mac + 2, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	else
		memcpy(mac + 2, (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr + 12, 4);
}

static uint16_t port_of(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_port;
	return ((const struct sockaddr_in6 *)sa)->sin6_port;
}

static uint16_t ipv4_csum(const uint8_t *h)
{
	uint32_t s = 0;
	for (int i = 0; i < 20; i += 2)
		s += (uint32_t)h[i] << 8 | h[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

size_t srn_pcap_headers(uint8_t *out, const struct sockaddr *src, const struct sockaddr *dst,
						size_t dgram_len, uint16_t ipv4_id)
{
	int fam = src->sa_family;
	if ((fam != AF_INET && fam != AF_INET6) || dst->sa_family != fam)
		return 0;
	mac_of(out, dst);
	mac_of(out + 6, src);
	put16(out + 12, fam == AF_INET ? 0x0800 : 0x86dd);
	uint8_t *ip = out + 14, *udp;
	if (fam == AF_INET) {
		ip[0] = 0x45;
		ip[1] = 0;
		put16(ip + 2, (uint16_t)(20 + 8 + dgram_len));
		put16(ip + 4, ipv4_id);
		put16(ip + 6, SRN_IPV4_DF);
		ip[8] = TTL_DEFAULT;
		ip[9] = IPPROTO_UDP_NUM;
		put16(ip + 10, 0);
		memcpy(ip + 12, &((const struct sockaddr_in *)src)->sin_addr, 4);
		memcpy(ip + 16, &((const struct sockaddr_in *)dst)->sin_addr, 4);
		put16(ip + 10, ipv4_csum(ip));
		udp = ip + 20;
	} else {
		memset(ip, 0, 4);
		ip[0] = 0x60;
		put16(ip + 4, (uint16_t)(8 + dgram_len));
		ip[6] = IPPROTO_UDP_NUM;
		ip[7] = TTL_DEFAULT;
		memcpy(ip + 8, &((const struct sockaddr_in6 *)src)->sin6_addr, 16);
		memcpy(ip + 24, &((const struct sockaddr_in6 *)dst)->sin6_addr, 16);
		udp = ip + 40;
	}
	uint16_t sp = port_of(src), dp = port_of(dst);
	memcpy(udp, &sp, 2);            /* already network order */
	memcpy(udp + 2, &dp, 2);
	put16(udp + 4, (uint16_t)(8 + dgram_len));
	put16(udp + 6, 0);
	return (size_t)(udp + 8 - out);
}

/* The IPv4 ID the sender's ICRC was computed with: 0 for softrnic peers;
 * for others the one solving the ICRC, else 0 (the frame then shows the
 * bad ICRC it really has). */
static uint16_t rx_ipv4_id(const struct sockaddr *src, const struct sockaddr *dst,
						   const struct iovec *iov, int iovcnt, size_t len)
{
	if (src->sa_family != AF_INET || iovcnt != 1 || len < 12 + 4)
		return 0;
	struct srn_ip_meta m = { .family = AF_INET, .ipv4_frag = SRN_IPV4_DF };
	memcpy(m.src, &((const struct sockaddr_in *)src)->sin_addr, 4);
	memcpy(m.dst, &((const struct sockaddr_in *)dst)->sin_addr, 4);
	m.sport = ntohs(port_of(src));
	m.dport = ntohs(port_of(dst));
	const uint8_t *d = iov[0].iov_base;
	struct iovec body = { iov[0].iov_base, len - 4 };
	uint16_t id = 0;
	if (srn_icrc_solve_ipv4_id(&m, &body, 1, srn_icrc_get(d + len - 4), &id))
		return 0;
	return id;
}

/* ---- buffered writing -------------------------------------------------- */

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		/* Records hold payloads as the wire carried them, read as by
		 * DMA (diag/memcheck.h); their headers were checked when made. */
		SRN_DMA_READ_BEGIN();
		ssize_t w = write(fd, p, n);
		int err = errno;
		SRN_DMA_READ_END();
		if (w < 0) {
			if (err == EINTR)
				continue;
			return -err;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Must hold p->lock. */
static int drain(struct srn_pcap *p)
{
	int rc = 0;
	if (p->used && !p->failed) {
		rc = write_all(p->fd, p->buf, p->used);
		if (rc)
			p->failed = true;
		else
			p->written += p->used;
	}
	p->used = 0;
	p->oldest_ns = 0;
	atomic_store_explicit(&p->deadline, 0, memory_order_relaxed);
	return rc;
}

/* Put the TOS into headers srn_pcap_headers wrote (IPv4: and fix the
 * header checksum), so the trace shows the DSCP and ECN bits. */
static void set_tos(uint8_t *frame, int family, uint8_t tos)
{
	uint8_t *ip = frame + 14;
	if (!tos)
		return;
	if (family == AF_INET) {
		ip[1] = tos;
		put16(ip + 10, 0);
		put16(ip + 10, ipv4_csum(ip));
	} else {
		ip[0] = (uint8_t)(0x60 | tos >> 4);
		ip[1] = (uint8_t)((ip[1] & 0x0f) | (tos & 0x0f) << 4);
	}
}

void srn_pcap_record(struct srn_pcap *p, const struct sockaddr *src, const struct sockaddr *dst,
					 const struct iovec *iov, int iovcnt, bool rx, uint64_t now_ns,
					 uint8_t tos)
{
	uint8_t hdr[16 + SRN_PCAP_HDRS_MAX];
	size_t len = 0;
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	uint16_t id = rx ? rx_ipv4_id(src, dst, iov, iovcnt, len) : 0;
	size_t hl = srn_pcap_headers(hdr + 16, src, dst, len, id);
	if (hl)
		set_tos(hdr + 16, src->sa_family, tos);
	size_t frame = hl + len, rec = 16 + frame;
	if (!hl || frame > SRN_PCAP_SNAPLEN) {
		atomic_fetch_add_explicit(&p->lost, 1, memory_order_relaxed);
		return;
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint32_t rh[4] = { (uint32_t)ts.tv_sec, (uint32_t)(ts.tv_nsec / 1000), (uint32_t)frame,
					   (uint32_t)frame };
	memcpy(hdr, rh, sizeof(rh));
	SRN_MEM_CHECK_DEFINED(hdr, 16 + hl);

	pthread_mutex_lock(&p->lock);
	if (p->failed || p->written + p->used + rec > p->max_bytes) {
		atomic_fetch_add_explicit(&p->lost, 1, memory_order_relaxed);
		pthread_mutex_unlock(&p->lock);
		return;
	}
	if (p->used + rec > PCAP_BUF)
		drain(p);
	if (p->failed) {
		atomic_fetch_add_explicit(&p->lost, 1, memory_order_relaxed);
		pthread_mutex_unlock(&p->lock);
		return;
	}
	uint8_t *w = p->buf + p->used;
	memcpy(w, hdr, 16 + hl);
	w += 16 + hl;
	for (int i = 0; i < iovcnt; i++) {
		memcpy(w, iov[i].iov_base, iov[i].iov_len);
		w += iov[i].iov_len;
	}
	p->used += rec;
	if (!p->oldest_ns) {
		p->oldest_ns = now_ns ? now_ns : 1;
		atomic_store_explicit(&p->deadline, p->oldest_ns + SRN_PCAP_FLUSH_NS,
							  memory_order_relaxed);
	} else if (now_ns >= p->oldest_ns + SRN_PCAP_FLUSH_NS) {
		drain(p);
	}
	pthread_mutex_unlock(&p->lock);
}

int srn_pcap_flush(struct srn_pcap *p, uint64_t now_ns)
{
	uint64_t due = atomic_load_explicit(&p->deadline, memory_order_relaxed);
	if (now_ns && (!due || now_ns < due))
		return 0;
	pthread_mutex_lock(&p->lock);
	size_t n = p->used;
	int rc = drain(p);
	pthread_mutex_unlock(&p->lock);
	return rc ? rc : (int)n;
}

uint64_t srn_pcap_next_ns(const struct srn_pcap *p)
{
	return atomic_load_explicit(&p->deadline, memory_order_relaxed);
}

uint64_t srn_pcap_lost(const struct srn_pcap *p)
{
	return atomic_load_explicit(&p->lost, memory_order_relaxed);
}

const char *srn_pcap_path(const struct srn_pcap *p)
{
	return p->path;
}

/* ---- open / close ------------------------------------------------------ */

int srn_pcap_expand_path(const char *tmpl, pid_t pid, char *out, size_t outlen)
{
	size_t o = 0;
	for (const char *s = tmpl; *s; s++) {
		char num[24];
		const char *add = num;
		if (s[0] == '%' && s[1] == 'p') {
			snprintf(num, sizeof(num), "%ld", (long)pid);
			s++;
		} else if (s[0] == '%' && s[1] == '%') {
			num[0] = '%', num[1] = '\0';
			s++;
		} else {
			num[0] = *s, num[1] = '\0';
		}
		size_t n = strlen(add);
		if (o + n >= outlen)
			return -ENAMETOOLONG;
		memcpy(out + o, add, n);
		o += n;
	}
	if (o >= outlen)
		return -ENAMETOOLONG;
	out[o] = '\0';
	return 0;
}

/* Why an existing file at the trace path is not ours to overwrite, or NULL
 * if it is: a regular file with one link, owned by our effective uid,
 * that no other user can read or write. Anything else may be a file an
 * attacker planted to read the trace (a 0666 file, a FIFO with a reader)
 * or a link to one of our own files to clobber (a hard link). A file that
 * was ever open to others is refused too: a reader may still hold it open. */
static const char *not_ours(const struct stat *st, char *why, size_t whylen)
{
	if (!S_ISREG(st->st_mode))
		return "it is not a regular file";
	if (st->st_uid != geteuid()) {
		snprintf(why, whylen, "it belongs to uid %lu, not to us", (unsigned long)st->st_uid);
		return why;
	}
	if (st->st_mode & (S_IRWXG | S_IRWXO)) {
		snprintf(why, whylen, "other users may open it (mode %04o, we write 0600)",
				 (unsigned)(st->st_mode & 07777));
		return why;
	}
	if (st->st_nlink != 1)
		return "it has other hard links";
	return NULL;
}

/* Create the trace file exclusively with mode 0600, or take over an old
 * trace of ours (see not_ours) and truncate it, as `tcpdump -w` does.
 * O_NOFOLLOW: a symlink in the last component is refused, never followed.
 * O_NONBLOCK: a planted FIFO without a reader fails (ENXIO) instead of
 * blocking the open forever; on a regular file it changes nothing. Every
 * check is made with fstat on the descriptor we write to, so the path
 * cannot be swapped between check and use. Returns the fd or -errno with
 * one line in err. */
static int open_trace_fd(const char *path, char *err, size_t errlen)
{
	const int flags = O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
	int fd = open(path, flags | O_CREAT | O_EXCL, 0600);
	if (fd >= 0) {
		/* The umask may have taken bits from 0600; a trace nobody can
		 * reopen is useless. fchmod never adds group/other bits here. */
		if (fchmod(fd, 0600) == 0)
			return fd;
		int e = errno;
		snprintf(err, errlen, "%s=%s: cannot set mode 0600 on the trace file: %s", SRN_PCAP_ENV,
				 path, strerror(e));
		close(fd);
		return -e;
	}
	int e = errno;
	bool exists = e == EEXIST;
	if (exists) {
		fd = open(path, flags);
		e = fd < 0 ? errno : 0;
	}
	if (fd < 0) {
		const char *what = strerror(e);
		if (e == ELOOP)
			what = "it is a symbolic link";
		else if (e == ENXIO)
			what = "it is a FIFO or device, not a regular file";
		if (e == ELOOP || e == ENXIO) {
			snprintf(err, errlen, "%s=%s: refusing to write the trace there: %s (remove it, or "
					 "trace into a directory only you can write)", SRN_PCAP_ENV, path, what);
			return -EEXIST;
		}
		snprintf(err, errlen, "%s=%s: cannot %s the trace file: %s", SRN_PCAP_ENV, path,
				 exists ? "open the existing" : "create", what);
		return -e;
	}
	struct stat st;
	char why[96];
	const char *refuse = NULL;
	if (fstat(fd, &st) == 0 && !(refuse = not_ours(&st, why, sizeof(why))) && ftruncate(fd, 0) == 0)
		return fd;
	e = errno;
	if (refuse) {
		snprintf(err, errlen, "%s=%s: refusing to write the trace there: %s (remove it, or "
				 "trace into a directory only you can write)", SRN_PCAP_ENV, path, refuse);
		e = EEXIST;
	} else {
		snprintf(err, errlen, "%s=%s: cannot truncate the trace file: %s", SRN_PCAP_ENV, path,
				 strerror(e));
	}
	close(fd);
	return -e;
}

static int open_file(struct srn_pcap *p, char *err, size_t errlen)
{
	p->fd = open_trace_fd(p->path, err, errlen);
	if (p->fd < 0)
		return p->fd;
	/* magic, version 2.4, thiszone, sigfigs, snaplen, network; host
	 * order throughout (readers detect it from the magic). */
	uint8_t gh[24];
	uint32_t w0[1] = { PCAP_MAGIC_US }, w2[4] = { 0, 0, SRN_PCAP_SNAPLEN, LINKTYPE_ETHERNET };
	uint16_t ver[2] = { 2, 4 };
	memcpy(gh, w0, 4);
	memcpy(gh + 4, ver, 4);
	memcpy(gh + 8, w2, 16);
	int rc = write_all(p->fd, gh, sizeof(gh));
	if (rc) {
		snprintf(err, errlen, "%s=%s: cannot write the trace file: %s", SRN_PCAP_ENV, p->path,
				 strerror(-rc));
		close(p->fd);
		return rc;
	}
	p->written = sizeof(gh);
	return 0;
}

int srn_pcap_open(const char *path, uint64_t max_bytes, struct srn_pcap **out, char *err,
				  size_t errlen)
{
	char full[PATH_MAX];
	int rc = srn_pcap_expand_path(path, getpid(), full, sizeof(full));
	if (rc) {
		snprintf(err, errlen, "%s: the file name is too long", SRN_PCAP_ENV);
		return rc;
	}
	pthread_mutex_lock(&reg_lock);
	for (struct srn_pcap *p = reg_head; p; p = p->next) {
		if (!strcmp(p->path, full)) {
			p->refs++;
			pthread_mutex_unlock(&reg_lock);
			*out = p;
			return 0;
		}
	}
	struct srn_pcap *p = calloc(1, sizeof(*p));
	if (p)
		p->buf = malloc(PCAP_BUF);
	if (!p || !p->buf) {
		pthread_mutex_unlock(&reg_lock);
		if (p)
			free(p);
		snprintf(err, errlen, "%s: out of memory", SRN_PCAP_ENV);
		return -ENOMEM;
	}
	memcpy(p->path, full, sizeof(full));
	p->max_bytes = max_bytes;
	rc = open_file(p, err, errlen);
	if (rc) {
		pthread_mutex_unlock(&reg_lock);
		free(p->buf);
		free(p);
		return rc;
	}
	pthread_mutex_init(&p->lock, NULL);
	p->refs = 1;
	p->next = reg_head;
	reg_head = p;
	pthread_mutex_unlock(&reg_lock);
	*out = p;
	return 0;
}

int srn_pcap_open_env(struct srn_pcap **out, char *err, size_t errlen)
{
	*out = NULL;
	const char *path = getenv(SRN_PCAP_ENV);
	if (!path || !*path)
		return 0;
	uint64_t mb = SRN_PCAP_DEFAULT_MAX_MB;
	const char *m = getenv(SRN_PCAP_MAX_ENV);
	if (m && *m) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(m, &end, 10);
		if (errno || *end || m[0] == '-' || v < 1 || v > PCAP_MAX_MB_LIMIT) {
			snprintf(err, errlen, "%s=%s: expected a whole number of MiB from 1 to %u",
					 SRN_PCAP_MAX_ENV, m, PCAP_MAX_MB_LIMIT);
			return -EINVAL;
		}
		mb = v;
	}
	return srn_pcap_open(path, mb << 20, out, err, errlen);
}

void srn_pcap_close(struct srn_pcap *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&reg_lock);
	if (--p->refs) {
		pthread_mutex_unlock(&reg_lock);
		return;
	}
	for (struct srn_pcap **pp = &reg_head; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	pthread_mutex_unlock(&reg_lock);
	pthread_mutex_lock(&p->lock);
	drain(p);
	pthread_mutex_unlock(&p->lock);
	close(p->fd);
	pthread_mutex_destroy(&p->lock);
	free(p->buf);
	free(p);
}
