/*
 * ports.c - rdma_cm ports: the kernel's port rules among this process's
 * ids, which listener takes a request, and the ports held across the
 * processes of one user.
 *
 * The port files.  The kernel keeps one rdma_cm port space per network
 * namespace, so a second rdma_bind_addr or rdma_listen on a port another
 * process holds fails, and two processes binding port 0 never get the
 * same port.  Here every process has its own CM, so every port an id
 * holds (explicit or ephemeral) is also written down in a directory of
 * our own:
 *
 *   /dev/shm/softrnic-cm-<euid>-<netns inode>/     0700, ours (checked on the fd);
 *                                                  elsewhere when another user
 *                                                  took the name (link/rundir.h)
 *     lock                                         0600, flock'ed while one
 *                                                  process checks and adds
 *     alive-<pid>-<token>                          0600, one per process, kept
 *                                                  open and flock'ed shared
 *                                                  while the process lives
 *     <ps>-<port>-<pid>-<n>-<token>                0600, one per held port:
 *                                                  its address and options
 *                                                  (the holder's pid third,
 *                                                  where it always was)
 *
 * A port file belongs to the process whose alive file it names; when that
 * file's lock can be taken (or it is gone) the process is dead, and
 * whoever finds that removes both.  One descriptor per process, not per
 * id: a program with thousands of connections keeps its descriptors.  The
 * token (random per process) keeps a reused pid from reviving a dead
 * process's files.  Every file is opened with O_NOFOLLOW | O_NONBLOCK
 * and used only if fstat on the descriptor shows a regular file of our
 * euid, mode 0600, of the record's size.  Files are created, checked
 * and removed only under the directory's lock, so a checker never sees
 * an alive file before its lock is taken.  Other users get their own
 * directory: their ports do not collide with ours (the trust rules give
 * them nothing of ours to read).  Where another user took the name, the
 * directory is one of its fallbacks (link/rundir.h), and the device log
 * says which; only where every name is taken are this process's ids
 * checked alone, and the log says that too.
 *
 * Ephemeral ports (bind to port 0, an implicit bind in rdma_resolve_addr):
 * under the lock a process picks, from the kernel's ephemeral range
 * (ip_local_port_range of its network namespace), a port that no file of
 * another process names and none of its own ids holds, and writes its
 * file before it lets the lock go.  An explicit bind elsewhere then sees
 * the ephemeral holder as the kernel's port check would.  A file left by
 * a dead process keeps its port out of the ephemeral choice until a
 * process's first reservation sweeps it.  Must hold srn_cm.lock.
 */
#include "cm/ports.h"
#include "cm/qp1.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "link/rundir.h"

uint16_t srn_cm_id_port(const struct srn_cm_id *id)
{
	return ntohs(id->id.route.addr.src_sin.sin_port);
}

static bool is_any(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr == INADDR_ANY;
	return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

static bool addr_match(const struct sockaddr *bound, const struct sockaddr *a)
{
	if (is_any(bound))
		return true;
	if (bound->sa_family != a->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)bound)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)a)->sin_addr.s_addr;
	return memcmp(&((const struct sockaddr_in6 *)bound)->sin6_addr,
		      &((const struct sockaddr_in6 *)a)->sin6_addr, 16) == 0;
}

bool srn_cm_port_in_use(enum rdma_port_space ps, const struct sockaddr *a, const struct srn_cm_id *except)
{
	uint16_t port = ntohs(((const struct sockaddr_in *)a)->sin_port);
	for (struct srn_cm_id *id = srn_cm.ids; id; id = id->next) {
		if (id == except || id->destroying || !id->owns_port || id->id.ps != ps ||
		    srn_cm_id_port(id) != port)
			continue;
		const struct sockaddr *b = &id->id.route.addr.src_addr;
		if (addr_match(b, a) || addr_match(a, b))
			return true;
	}
	return false;
}

static bool same_addr(const struct sockaddr *x, const struct sockaddr *y)
{
	if (x->sa_family != y->sa_family)
		return false;
	if (x->sa_family == AF_INET)
		return ((const struct sockaddr_in *)x)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)y)->sin_addr.s_addr;
	const struct sockaddr_in6 *a = (const void *)x, *b = (const void *)y;
	return memcmp(&a->sin6_addr, &b->sin6_addr, 16) == 0 && a->sin6_scope_id == b->sin6_scope_id;
}

int srn_cm_port_rule(const struct sockaddr *a, bool reuse, bool afonly, const struct srn_cm_binding *cur)
{
	const struct sockaddr *c = (const struct sockaddr *)&cur->addr;
	if (reuse && cur->reuseaddr)
		return 0;
	if (afonly && cur->afonly && a->sa_family != c->sa_family)
		return 0;
	if (is_any(a) || is_any(c))
		return -EADDRNOTAVAIL;
	return same_addr(a, c) ? -EADDRINUSE : 0;
}

/* The kernel's check of an explicit port against this process's ids that
 * hold it.  A listener holds its address alone (its reuseaddr is gone). */
static int check_local(const struct srn_cm_id *id, const struct sockaddr *a, bool reuse)
{
	uint16_t port = ntohs(((const struct sockaddr_in *)a)->sin_port);
	for (struct srn_cm_id *o = srn_cm.ids; o; o = o->next) {
		if (o == id || o->destroying || !o->owns_port || o->id.ps != id->id.ps ||
		    srn_cm_id_port(o) != port)
			continue;
		struct srn_cm_binding b = { .reuseaddr = o->reuseaddr && o->state != SRN_CMS_LISTEN,
					    .afonly = o->afonly };
		memcpy(&b.addr, &o->id.route.addr.src_storage, sizeof(b.addr));
		int ret = srn_cm_port_rule(a, reuse, id->afonly, &b);
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- the port files ---- */

#define PORT_REC_MAGIC 0x32504d434e5253ull   /* "SRNCMP2" */
#define OPEN_SAFE (O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)

struct port_rec {
	uint64_t magic;
	int32_t pid;
	uint16_t ps, port;
	uint8_t reuseaddr, afonly;
	uint8_t pad[6];
	struct sockaddr_storage addr;
};

static int dir_fd = -2;                /* -2: not looked at yet, -1: none usable */
static int alive_fd = -1;              /* our alive file, flock'ed shared */
static pid_t alive_pid;                /* whose: a forked child makes its own */
static unsigned long long token;
static unsigned serial;

/* Is fd a regular file of ours, mode 0600, size bytes (-1: any)? */
static bool file_ours(int fd, off_t size)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	       (st.st_mode & 07777) == 0600 && st.st_nlink == 1 && (size < 0 || st.st_size == size);
}

/* libibverbs.so.1's private entry point (src/verbs/verbs_note.c). */
void softrnic_dev_note(struct ibv_context *ctx, const char *line);

static int port_dir(void)
{
	if (dir_fd != -2)
		return dir_fd;
	/* Ours, held until exit; a fallback when another user took the
	 * name, which every device's log tells once. */
	const struct srn_rundir *d = srn_rundir_get(SRN_RUNDIR_CM);
	dir_fd = d->fd;
	for (int i = 0; d->note[0] && i < srn_cm.ndev; i++)
		softrnic_dev_note(srn_cm.dev[i].ctx, d->note);
	return dir_fd;
}

/* The directory's lock, taken (blocking: holders only scan the directory). */
static int lock_dir(int dfd)
{
	int fd = openat(dfd, "lock", O_RDWR | O_CREAT | OPEN_SAFE, 0600);
	if (fd < 0)
		return -errno;
	if (!file_ours(fd, -1) || flock(fd, LOCK_EX)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

static void unlock_dir(int lfd)
{
	flock(lfd, LOCK_UN);
	close(lfd);
}

/* Our alive file, made at the first hold (under the directory's lock).
 * A forked child makes its own: its files name its pid; the parent's
 * descriptor it inherited is closed (the parent's lock stays, it is on
 * the parent's open file too). */
static bool alive(int dfd)
{
	if (alive_fd >= 0 && alive_pid == getpid())
		return true;
	if (alive_fd >= 0) {
		close(alive_fd);
		alive_fd = -1;
	}
	if (getrandom(&token, sizeof(token), 0) != sizeof(token))
		token = srn_now_ns() ^ (unsigned long long)getpid() << 40;
	char name[48];
	snprintf(name, sizeof(name), "alive-%d-%016llx", (int)getpid(), token);
	int fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | OPEN_SAFE, 0600);
	if (fd < 0)
		return false;
	if (fchmod(fd, 0600) || flock(fd, LOCK_SH)) {
		close(fd);
		unlinkat(dfd, name, 0);
		return false;
	}
	alive_fd = fd;
	alive_pid = getpid();
	return true;
}

/* Is the process behind alive-<pid>-<tok> alive?  If not, its alive file
 * goes (the caller removes the port file that named it). */
static bool owner_alive(int dfd, int pid, unsigned long long tok)
{
	if (pid == getpid() && tok == token && alive_pid == getpid())
		return true;
	char name[48];
	snprintf(name, sizeof(name), "alive-%d-%016llx", pid, tok);
	int fd = openat(dfd, name, O_RDONLY | OPEN_SAFE);
	if (fd < 0)
		return errno != ENOENT;        /* gone: dead; unreadable: assume alive */
	bool live = !file_ours(fd, -1) || flock(fd, LOCK_EX | LOCK_NB) != 0;
	if (!live)
		unlinkat(dfd, name, 0);
	close(fd);
	return live;
}

/* Read a live holder's record from dfd/name; false when it is not a
 * valid record of ours or its holder is dead (then the file goes). */
static bool read_live(int dfd, const char *name, uint16_t ps, uint16_t port, struct port_rec *r)
{
	int pid;
	unsigned long long tok;
	if (sscanf(name, "%*4x-%*5u-%d-%*u-%16llx", &pid, &tok) != 2)
		return false;
	int fd = openat(dfd, name, O_RDONLY | OPEN_SAFE);
	if (fd < 0)
		return false;
	bool ok = file_ours(fd, sizeof(*r)) && pread(fd, r, sizeof(*r), 0) == (ssize_t)sizeof(*r) &&
		  r->magic == PORT_REC_MAGIC && r->ps == ps && r->port == port && r->pid == pid &&
		  (r->addr.ss_family == AF_INET || r->addr.ss_family == AF_INET6);
	close(fd);
	if (ok && !owner_alive(dfd, pid, tok)) {
		unlinkat(dfd, name, 0);        /* its process is gone */
		ok = false;
	}
	return ok;
}

/* The directory opened for a scan from its first entry (closedir). */
static DIR *scan_dir(int dfd)
{
	int dfd2 = dup(dfd);           /* closedir closes its own descriptor */
	DIR *d = dfd2 >= 0 ? fdopendir(dfd2) : NULL;
	if (!d) {
		if (dfd2 >= 0)
			close(dfd2);
		return NULL;
	}
	rewinddir(d);                  /* the dup shares dir_fd's position */
	return d;
}

/* Remove the files of dead holders (a process that exits or is killed
 * while it holds ports leaves its files; the next process cleans up),
 * and alive files nobody holds. */
static void sweep(int dfd)
{
	DIR *d = scan_dir(dfd);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		unsigned ps, port;
		int pid;
		unsigned long long tok;
		struct port_rec r;
		if (sscanf(e->d_name, "%4x-%5u-", &ps, &port) == 2)
			read_live(dfd, e->d_name, (uint16_t)ps, (uint16_t)port, &r);
		else if (sscanf(e->d_name, "alive-%d-%16llx", &pid, &tok) == 2)
			owner_alive(dfd, pid, tok);
	}
	closedir(d);
}

/* The first reservation of a process removes dead holders' files. */
static void sweep_once(int dfd)
{
	static bool swept;
	if (!swept) {
		swept = true;
		sweep(dfd);
	}
}

/* The kernel's verdict (cma_check_port) against every live holder of the
 * port in other processes: 0, -EADDRINUSE or -EADDRNOTAVAIL. */
static int check_others(int dfd, const struct srn_cm_id *id, bool reuse)
{
	char prefix[32];
	uint16_t ps = (uint16_t)id->id.ps, port = srn_cm_id_port(id);
	int n = snprintf(prefix, sizeof(prefix), "%04x-%05u-", ps, port);
	DIR *d = scan_dir(dfd);
	if (!d)
		return 0;
	int ret = 0;
	struct dirent *e;
	while (!ret && (e = readdir(d))) {
		struct port_rec r;
		if (strncmp(e->d_name, prefix, (size_t)n) != 0 || !read_live(dfd, e->d_name, ps, port, &r) ||
		    r.pid == getpid())
			continue;
		struct srn_cm_binding b = { .addr = r.addr, .reuseaddr = r.reuseaddr, .afonly = r.afonly };
		ret = srn_cm_port_rule(&id->id.route.addr.src_addr, reuse, id->afonly, &b);
	}
	closedir(d);
	return ret;
}

/* Write the id's hold on a (address and port) into its file: created the
 * first time (exclusive, 0600), rewritten later (a listener drops its
 * reuseaddr).  On failure the port stays held in this process only. */
static void write_rec(int dfd, struct srn_cm_id *id, const struct sockaddr *a, bool reuse)
{
	struct port_rec r = { .magic = PORT_REC_MAGIC, .pid = getpid(), .ps = (uint16_t)id->id.ps,
			      .port = ntohs(((const struct sockaddr_in *)a)->sin_port), .reuseaddr = reuse,
			      .afonly = id->afonly };
	memcpy(&r.addr, a, a->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
	if (!alive(dfd))
		return;
	int fd;
	if (id->port_file) {
		fd = openat(dfd, id->port_name, O_WRONLY | OPEN_SAFE);
	} else {
		snprintf(id->port_name, sizeof(id->port_name), "%04x-%05u-%d-%u-%016llx", (unsigned)r.ps,
			 r.port, (int)getpid(), serial++, token);
		fd = openat(dfd, id->port_name, O_WRONLY | O_CREAT | O_EXCL | OPEN_SAFE, 0600);
		if (fd >= 0 && fchmod(fd, 0600)) {
			close(fd);
			fd = -1;
			unlinkat(dfd, id->port_name, 0);
		}
	}
	if (fd < 0) {
		srn_cm_port_release(id);
		return;
	}
	bool ok = file_ours(fd, -1) && pwrite(fd, &r, sizeof(r), 0) == (ssize_t)sizeof(r);
	close(fd);
	id->port_file = true;
	if (!ok)
		srn_cm_port_release(id);
}

int srn_cm_port_reserve(struct srn_cm_id *id, bool listen)
{
	int dfd = port_dir();
	if (dfd < 0)
		return 0;              /* no directory: ours alone */
	int lfd = lock_dir(dfd);
	if (lfd < 0)
		return 0;
	sweep_once(dfd);
	/* A listener must be alone on its address, reuseaddr or not (the
	 * kernel's rdma_listen checks again without it, then clears it). */
	bool reuse = id->reuseaddr && !listen;
	int ret = check_others(dfd, id, reuse);
	if (!ret)
		write_rec(dfd, id, &id->id.route.addr.src_addr, reuse);
	unlock_dir(lfd);
	return ret;
}

/* The kernel's ephemeral range for this network namespace
 * (inet_get_local_port_range); 32768-60999, its default, if unreadable. */
static void local_range(uint32_t *lo, uint32_t *hi)
{
	static uint32_t rlo, rhi;
	if (!rlo) {
		unsigned a = 0, b = 0;
		FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
		if (!f || fscanf(f, "%u %u", &a, &b) != 2 || a < 1 || a > b || b > 65535)
			a = 32768, b = 60999;
		if (f)
			fclose(f);
		rlo = a;
		rhi = b;
	}
	*lo = rlo;
	*hi = rhi;
}

/* Mark in held[] every port of port space ps that a file of another
 * process names.  Names are enough (no open per file): a stale one only
 * keeps its port out of this choice. */
static void others_ports(int dfd, uint16_t ps, uint64_t held[65536 / 64])
{
	DIR *d = scan_dir(dfd);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		unsigned fps, port;
		int pid;
		unsigned long long tok;
		if (sscanf(e->d_name, "%4x-%5u-%d-%*u-%16llx", &fps, &port, &pid, &tok) == 4 && fps == ps &&
		    port < 65536 && (pid != getpid() || tok != token || alive_pid != getpid()))
			held[port / 64] |= 1ull << (port % 64);
	}
	closedir(d);
}

int srn_cm_port_ephemeral(struct srn_cm_id *id, struct sockaddr *a)
{
	static uint64_t held[65536 / 64];   /* under srn_cm.lock */
	struct sockaddr_in *s = (void *)a;
	uint32_t lo, hi, r = 0;
	local_range(&lo, &hi);
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)srn_now_ns();
	memset(held, 0, sizeof(held));
	int dfd = port_dir();
	int lfd = dfd >= 0 ? lock_dir(dfd) : -1;
	if (lfd >= 0) {
		sweep_once(dfd);
		others_ports(dfd, (uint16_t)id->id.ps, held);
	}
	int ret = -EADDRNOTAVAIL;
	uint32_t n = hi - lo + 1;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t port = lo + (r + i) % n;
		if (held[port / 64] & 1ull << (port % 64))
			continue;
		s->sin_port = htons((uint16_t)port);
		if (!srn_cm_port_in_use(id->id.ps, a, id)) {
			ret = 0;
			break;
		}
	}
	if (lfd >= 0) {
		if (!ret)
			write_rec(dfd, id, a, id->reuseaddr);
		unlock_dir(lfd);
	}
	return ret;
}

void srn_cm_port_release(struct srn_cm_id *id)
{
	if (!id->port_file)
		return;
	if (dir_fd >= 0)
		unlinkat(dir_fd, id->port_name, 0);
	id->port_file = false;
}

/* ---- binding and listening ---- */

int srn_cm_listen_check(struct srn_cm_id *id)
{
	int ret = check_local(id, &id->id.route.addr.src_addr, false);
	if (!ret)
		ret = srn_cm_port_reserve(id, true);
	if (!ret)
		id->reuseaddr = false;    /* as the kernel's rdma_listen */
	return ret;
}

int srn_cm_port_alloc(struct srn_cm_id *id, struct sockaddr *a)
{
	struct sockaddr_in *s = (void *)a;
	if (s->sin_port) {
		int ret = check_local(id, a, id->reuseaddr);
		if (ret)
			return ret;
		id->owns_port = true;
		return 0;
	}
	/* Ephemeral: free here and in this user's other processes. */
	int ret = srn_cm_port_ephemeral(id, a);
	if (!ret)
		id->owns_port = true;
	return ret;
}

struct srn_cm_id *srn_cm_listener_for(uint64_t service_id, const struct sockaddr *dst)
{
	uint16_t ps = (uint16_t)(service_id >> 16), port = (uint16_t)service_id;
	struct srn_cm_id *any = NULL;
	for (struct srn_cm_id *id = srn_cm.ids; id; id = id->next) {
		if (id->state != SRN_CMS_LISTEN || id->destroying || (uint16_t)id->id.ps != ps ||
		    srn_cm_id_port(id) != port)
			continue;
		const struct sockaddr *b = &id->id.route.addr.src_addr;
		if (is_any(b)) {
			/* AF_INET6 wildcard takes IPv4 too unless AFONLY. */
			if (b->sa_family == dst->sa_family || (b->sa_family == AF_INET6 && !id->afonly))
				any = id;
		} else if (addr_match(b, dst)) {
			return id;
		}
	}
	return any;
}

int srn_cm_listener_take(struct srn_cm_dev *dev, uint64_t service_id, const uint8_t *pdata, size_t len,
			 struct srn_cma_hdr *h, struct srn_cm_id **out)
{
	if ((service_id & SRN_CMA_SID_PREFIX_MASK) != SRN_CMA_SID_PREFIX)
		return -ENOENT;        /* not an RDMA IP CM service ID */
	if (srn_cma_hdr_parse(pdata, len, (uint16_t)service_id, h))
		return -EINVAL;
	struct srn_cm_id *l = srn_cm_listener_for(service_id, (struct sockaddr *)&h->dst);
	if (!l || (l->dev && l->dev != dev))
		return -ENOENT;
	if (l->pending >= l->backlog)
		return -ENOBUFS;       /* backlog full */
	*out = l;
	return 0;
}

/* ---- who holds a request's port, for the link (any thread) ---- */

long srn_cm_port_holder(const uint8_t *mad, size_t len)
{
	struct srn_cm_msg m;
	if (len > SRN_MAD_LEN)
		len = SRN_MAD_LEN;
	if (srn_cm_mad_parse(mad, len, &m))
		return 0;
	uint64_t sid;
	const uint8_t *pdata;
	size_t plen;
	if (m.attr == SRN_CM_ATTR_REQ) {
		sid = m.req.service_id;
		pdata = m.req.pdata;
		plen = sizeof(m.req.pdata);
	} else if (m.attr == SRN_CM_ATTR_SIDR_REQ) {
		sid = m.sidr_req.service_id;
		pdata = m.sidr_req.pdata;
		plen = sizeof(m.sidr_req.pdata);
	} else {
		return 0;
	}
	return srn_cm_port_holder_sid(sid, pdata, plen);
}

long srn_cm_port_holder_sid(uint64_t sid, const uint8_t *pdata, size_t plen)
{
	struct srn_cma_hdr h;
	if ((sid & SRN_CMA_SID_PREFIX_MASK) != SRN_CMA_SID_PREFIX ||
	    srn_cma_hdr_parse(pdata, plen, (uint16_t)sid, &h))
		return 0;
	uint16_t ps = (uint16_t)(sid >> 16), port = (uint16_t)sid;
	/* A descriptor of its own: dir_fd belongs to the CM thread, and this
	 * may run before the CM made (or chose) its directory.  Only one that
	 * exists and is ours counts (link/rundir.h). */
	char path[SRN_RUNDIR_PATH_MAX];
	if (!srn_rundir_peek(SRN_RUNDIR_CM, path, sizeof(path)))
		return 0;
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (dfd >= 0 && (fstat(dfd, &st) || st.st_uid != geteuid() || (st.st_mode & 077))) {
		close(dfd);
		dfd = -1;
	}
	if (dfd < 0)
		return 0;
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return 0;
	}
	long found = 0;
	struct dirent *e;
	while (!found && (e = readdir(d))) {
		unsigned fps, fport;
		int pid;
		if (sscanf(e->d_name, "%4x-%5u-%d-", &fps, &fport, &pid) != 3 || fps != ps ||
		    fport != port || pid <= 0 || kill(pid, 0))
			continue;
		int fd = openat(dfd, e->d_name, O_RDONLY | OPEN_SAFE);
		if (fd < 0)
			continue;
		struct port_rec r;
		if (file_ours(fd, sizeof(r)) && pread(fd, &r, sizeof(r), 0) == (ssize_t)sizeof(r) &&
		    r.magic == PORT_REC_MAGIC && r.ps == ps && r.port == port && r.pid == pid &&
		    addr_match((const struct sockaddr *)&r.addr, (const struct sockaddr *)&h.dst))
			found = pid;
		close(fd);
	}
	closedir(d);
	return found;
}
