/*
 * port_files.c - rdma_cm ports held across the processes of one user.
 *
 * The kernel keeps one rdma_cm port space per network namespace, so a
 * second rdma_bind_addr or rdma_listen on a port another process holds
 * fails.  Here every process has its own CM, so a port bound explicitly
 * (rdma_bind_addr with a port) is also written down as a file in a
 * directory of our own:
 *
 *   /dev/shm/softrnic-cm-<euid>-<netns inode>/   0700, ours (checked on the fd)
 *     lock                                       0600, flock'ed while one
 *                                                process checks and adds
 *     <ps>-<port>-<pid>-<n>                      0600, one per bound id:
 *                                                its address and options
 *
 * The owner holds a shared flock on its file as long as the id holds the
 * port; a file whose lock can be taken belongs to a dead process and is
 * removed by whoever finds it.  Every file is opened with O_NOFOLLOW |
 * O_NONBLOCK and used only if fstat on the descriptor shows a regular
 * file of our euid, mode 0600, of the record's size.  Other users get
 * their own directory: their ports do not collide with ours (the trust
 * rules give them nothing of ours to read), and where the directory name
 * is taken by someone else only this process's ids are checked.
 *
 * Ephemeral ports (bind to port 0, rdma_resolve_addr) are not written
 * down: they come from this process's share of 32768-60999 and collide
 * only with an explicit bind of the same port elsewhere, which the
 * kernel would refuse and we let pass.  Must hold srn_cm.lock.
 */
#include "cm/cm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define PORT_DIR_FMT "/dev/shm/softrnic-cm-%u-%llx"
#define PORT_REC_MAGIC 0x31504d434e5253ull   /* "SRNCMP1" */
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
static unsigned serial;

/* Is fd a regular file of ours, mode 0600, size bytes (-1: any)? */
static bool file_ours(int fd, off_t size)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	       (st.st_mode & 07777) == 0600 && st.st_nlink == 1 && (size < 0 || st.st_size == size);
}

static int port_dir(void)
{
	if (dir_fd != -2)
		return dir_fd;
	dir_fd = -1;
	struct stat st;
	char path[96];
	unsigned long long netns = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0;
	snprintf(path, sizeof(path), PORT_DIR_FMT, (unsigned)geteuid(), netns);
	if (mkdir(path, 0700) && errno != EEXIST)
		return -1;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	/* Another user may have made the name first: then it is not ours. */
	if (fstat(fd, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 07777) != 0700) {
		close(fd);
		return -1;
	}
	dir_fd = fd;
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

/* Read a live holder's record from dfd/name; false when it is not a
 * valid record of ours or its holder is dead (then the file goes). */
static bool read_live(int dfd, const char *name, uint16_t ps, uint16_t port, struct port_rec *r)
{
	int fd = openat(dfd, name, O_RDONLY | OPEN_SAFE);
	if (fd < 0)
		return false;
	bool ok = file_ours(fd, sizeof(*r)) && pread(fd, r, sizeof(*r), 0) == (ssize_t)sizeof(*r) &&
		  r->magic == PORT_REC_MAGIC && r->ps == ps && r->port == port &&
		  (r->addr.ss_family == AF_INET || r->addr.ss_family == AF_INET6);
	if (ok && flock(fd, LOCK_EX | LOCK_NB) == 0) {
		unlinkat(dfd, name, 0);        /* nobody holds it: its process is gone */
		ok = false;
	}
	close(fd);
	return ok;
}

/* Remove the files of dead holders (a process killed while it held a
 * port leaves its file; the next process of the user cleans up). */
static void sweep(int dfd)
{
	int dfd2 = dup(dfd);
	DIR *d = dfd2 >= 0 ? fdopendir(dfd2) : NULL;
	if (!d) {
		if (dfd2 >= 0)
			close(dfd2);
		return;
	}
	rewinddir(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		unsigned ps, port;
		struct port_rec r;
		if (sscanf(e->d_name, "%4x-%5u-", &ps, &port) == 2)
			read_live(dfd, e->d_name, (uint16_t)ps, (uint16_t)port, &r);
	}
	closedir(d);
}

/* The kernel's verdict (cma_check_port) against every live holder of the
 * port in other processes: 0, -EADDRINUSE or -EADDRNOTAVAIL. */
static int check_others(int dfd, const struct srn_cm_id *id, bool reuse)
{
	char prefix[32];
	uint16_t ps = (uint16_t)id->id.ps, port = srn_cm_id_port(id);
	int n = snprintf(prefix, sizeof(prefix), "%04x-%05u-", ps, port);
	int dfd2 = dup(dfd);           /* closedir closes its own descriptor */
	DIR *d = dfd2 >= 0 ? fdopendir(dfd2) : NULL;
	if (!d) {
		if (dfd2 >= 0)
			close(dfd2);
		return 0;
	}
	rewinddir(d);                  /* the dup shares dir_fd's position */
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

static int write_rec(const struct srn_cm_id *id, bool reuse)
{
	struct port_rec r = { .magic = PORT_REC_MAGIC, .pid = getpid(), .ps = (uint16_t)id->id.ps,
			      .port = srn_cm_id_port(id), .reuseaddr = reuse, .afonly = id->afonly };
	memcpy(&r.addr, &id->id.route.addr.src_storage, sizeof(r.addr));
	return pwrite(id->port_fd, &r, sizeof(r), 0) == (ssize_t)sizeof(r) ? 0 : -EIO;
}

int srn_cm_port_reserve(struct srn_cm_id *id, bool listen)
{
	int dfd = port_dir();
	if (dfd < 0 || (listen && id->port_fd < 0))
		return 0;              /* no directory, or an ephemeral port: ours alone */
	int lfd = lock_dir(dfd);
	if (lfd < 0)
		return 0;
	static bool swept;
	if (!swept) {
		swept = true;
		sweep(dfd);
	}
	/* A listener must be alone on its address, reuseaddr or not (the
	 * kernel's rdma_listen checks again without it, then clears it). */
	bool reuse = id->reuseaddr && !listen;
	int ret = check_others(dfd, id, reuse);
	if (!ret && id->port_fd < 0) {
		snprintf(id->port_name, sizeof(id->port_name), "%04x-%05u-%d-%u", (unsigned)id->id.ps,
			 srn_cm_id_port(id), (int)getpid(), serial++);
		int fd = openat(dfd, id->port_name, O_RDWR | O_CREAT | O_EXCL | OPEN_SAFE, 0600);
		if (fd >= 0 && (fchmod(fd, 0600) || flock(fd, LOCK_SH))) {
			close(fd);
			unlinkat(dfd, id->port_name, 0);
			fd = -1;
		}
		id->port_fd = fd;      /* not written down: the port is still ours here */
	}
	if (!ret && id->port_fd >= 0 && write_rec(id, reuse))
		srn_cm_port_release(id);
	flock(lfd, LOCK_UN);
	close(lfd);
	return ret;
}

void srn_cm_port_release(struct srn_cm_id *id)
{
	if (id->port_fd < 0)
		return;
	/* Unlink first: a checker that opened it before sees our lock, one
	 * after does not find it. */
	if (dir_fd >= 0)
		unlinkat(dir_fd, id->port_name, 0);
	close(id->port_fd);
	id->port_fd = -1;
}
