/*
 * shm_file.c - the files behind a same-host inbox (see shm_file.h): the
 * sealed memfd, the locator under the inbox's name in /dev/shm, and the
 * checks that keep other users' files out of our hands.
 *
 * /dev/shm is world-writable (sticky): anyone can create any name there
 * first.  So a name is never trusted for what it says; a file is used only
 * when the descriptor we hold shows it is ours (uid, mode 0600, regular,
 * size), and a name someone else holds is left alone and reported.
 */
#include "link/shm_file.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "link/rundir.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U        /* Linux 6.3; older glibc lacks the name */
#endif

#define SHM_DIR "/dev/shm/"
#define SHM_PREFIX "softrnic-link-"
#define SHM_DEV_NAMES (SRN_SHM_NAMES - 1)   /* in /dev/shm; the last is in the user's directory */
/* Opening a name in /dev/shm: never through a symlink, never blocking on
 * a FIFO, never a controlling terminal, never inherited by exec. */
#define OPEN_SAFE (O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)

bool srn_shm_pid_alive(int32_t pid)
{
	/* kill(pid, 0) still succeeds on a zombie (killed, not yet reaped:
	 * a container's pid 1 may take its time), hence /proc/PID/stat. */
	if (pid <= 0 || (kill(pid, 0) != 0 && errno != EPERM))
		return false;
	char path[32], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = 0;
	const char *rp = strrchr(buf, ')');   /* the name may hold anything */
	return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

/* Name k under directory dir (NULL: /dev/shm's names, k < SHM_DEV_NAMES). */
static bool name_in(char *out, size_t n, const char *dir, uint64_t netns, const struct sockaddr *a,
		    unsigned member, unsigned k)
{
	char ip[INET6_ADDRSTRLEN], alt[16] = "", mem[16] = "";
	unsigned port;
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)a;
		if (IN_MULTICAST(ntohl(s->sin_addr.s_addr)))
			return false;
		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof(ip));
		port = ntohs(s->sin_port);
	} else if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)a;
		if (s->sin6_addr.s6_addr[0] == 0xff)
			return false;
		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof(ip));
		port = ntohs(s->sin6_port);
	} else {
		return false;
	}
	if (k >= SRN_SHM_NAMES)
		return false;
	if (k && !dir)
		snprintf(alt, sizeof(alt), "-alt%u", k);
	if (member)
		snprintf(mem, sizeof(mem), "-m%u", member);
	if (dir)
		return (size_t)snprintf(out, n, "%s/%llx-%s-%u%s", dir, (unsigned long long)netns, ip,
					port, mem) < n;
	return (size_t)snprintf(out, n, SHM_DIR SHM_PREFIX "%llx-%s-%u%s%s", (unsigned long long)netns,
				ip, port, mem, alt) < n;
}

bool srn_shm_name(char *out, size_t n, uint64_t netns, const struct sockaddr *a, unsigned member,
		  unsigned k)
{
	char dir[SRN_RUNDIR_PATH_MAX];
	if (k < SHM_DEV_NAMES)
		return name_in(out, n, NULL, netns, a, member, k);
	return srn_rundir_peek(SRN_RUNDIR_LINK, dir, sizeof(dir)) &&
	       name_in(out, n, dir, netns, a, member, k);
}

int srn_shm_file_ours(int fd, long long size)
{
	struct stat st;
	if (fstat(fd, &st))
		return -errno;
	/* A FIFO, a directory, a device: nothing we could map or read. */
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	/* Another user's file (root included: root's processes may open
	 * anything, so the owner, not the open, is the check), or ours with
	 * bits that let others in. */
	if (st.st_uid != geteuid() || (st.st_mode & 07777) != 0600)
		return -EPERM;
	/* A size other than the one its header promises: a mapping of it
	 * would reach past its end. */
	if (size >= 0 && st.st_size != (off_t)size)
		return -EINVAL;
	return 0;
}

int srn_shm_memfd_create(size_t bytes, size_t reserve)
{
	return srn_shm_memfd_create_named("softrnic-link", bytes, reserve);
}

int srn_shm_memfd_create_named(const char *name, size_t bytes, size_t reserve)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
	if (fd < 0 && errno == EINVAL)
		fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	/* memfds start 0777 (0666 with NOEXEC_SEAL) whatever the umask;
	 * peers accept exactly 0600.  The reservation makes a later page
	 * fault of the header impossible to refuse; the seals make a
	 * shrink impossible, so no mapping of it can ever SIGBUS. */
	int ret = fchmod(fd, 0600) || ftruncate(fd, (off_t)bytes) ||
			  (reserve && fallocate(fd, 0, 0, (off_t)reserve)) ||
			  fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
		  ? -errno : srn_shm_file_ours(fd, (long long)bytes);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

int srn_shm_memfd_open(const struct srn_shm_locator *loc, size_t bytes)
{
	return srn_shm_peer_fd_open(loc->pid, loc->fd, bytes);
}

/* Open descriptor pfd of process pid and check it: exactly `bytes` long,
 * or with at_least at least that (a mapping of its first `bytes` still
 * never faults past the end: the file cannot shrink). */
static int peer_fd_open(int32_t pid, int32_t pfd, size_t bytes, bool at_least)
{
	char path[48];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, (int)pfd);
	/* A magic link: following it is the point (no O_NOFOLLOW).  The
	 * kernel lets only the owner's user (and root) through. */
	int fd = open(path, O_RDWR | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Seals first: once SHRINK is on, the size we check next stays. */
	int seals = fcntl(fd, F_GET_SEALS);
	int ret = seals < 0 || !(seals & F_SEAL_SHRINK) ? -EPERM
							: srn_shm_file_ours(fd, at_least ? -1 : (long long)bytes);
	struct stat st;
	if (!ret && at_least && (fstat(fd, &st) || st.st_size < (off_t)bytes))
		ret = -EINVAL;
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

int srn_shm_peer_fd_open(int32_t pid, int32_t pfd, size_t bytes)
{
	return peer_fd_open(pid, pfd, bytes, false);
}

int srn_shm_peer_fd_open_min(int32_t pid, int32_t pfd, size_t bytes)
{
	return peer_fd_open(pid, pfd, bytes, true);
}

/* "uid 65534, regular file, mode 0644" for the device log. */
static void describe(const char *path, char *out, size_t n)
{
	struct stat st;
	if (lstat(path, &st)) {
		snprintf(out, n, "someone (%s)", strerror(errno));
		return;
	}
	const char *kind = S_ISREG(st.st_mode) ? "file" : S_ISLNK(st.st_mode) ? "symlink"
		: S_ISFIFO(st.st_mode) ? "FIFO" : S_ISDIR(st.st_mode) ? "directory" : "special file";
	snprintf(out, n, "uid %u (%s, mode %04o)", (unsigned)st.st_uid, kind,
		 (unsigned)(st.st_mode & 07777));
}

/* A file of our own user under one of our names is a dead owner's (only
 * the process holding the address creates there): remove it.  In sticky
 * /dev/shm nobody but us (and root) can put another file under a name of
 * ours between the lstat and the unlink. */
static void remove_if_ours(const char *path)
{
	struct stat st;
	if (lstat(path, &st) == 0 && st.st_uid == geteuid())
		unlink(path);
}

/* Create the locator at path exclusively: 0, -EEXIST (someone's name),
 * or another -errno. */
static int create_at(const char *path, const struct srn_shm_locator *loc)
{
	/* 0600 asked, fchmod'ed below: the umask can only take bits away,
	 * and then peers would refuse the file. */
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | OPEN_SAFE, 0600);
	if (fd < 0)
		return -errno;
	int ret = fchmod(fd, 0600) ? -errno : srn_shm_file_ours(fd, 0);
	if (!ret && pwrite(fd, loc, sizeof(*loc), 0) != (ssize_t)sizeof(*loc))
		ret = -EIO;
	close(fd);
	if (ret)
		unlink(path);
	return ret;
}

int srn_shm_locator_publish(const struct srn_shm_locator *loc, const struct sockaddr *local,
			    unsigned member, char *name, size_t namelen, char *note, size_t notelen)
{
	char path[SRN_SHM_NAMES][SRN_SHM_NAME_MAX], taken[64] = "";
	for (unsigned k = 0; k < SHM_DEV_NAMES; k++)
		if (!name_in(path[k], sizeof(path[k]), NULL, loc->netns, local, member, k))
			return -EAFNOSUPPORT;
	for (unsigned k = 0; k < SRN_SHM_NAMES; k++)
		if (k < SHM_DEV_NAMES || srn_shm_name(path[k], sizeof(path[k]), loc->netns, local, member, k))
			remove_if_ours(path[k]);
	for (unsigned k = 0; k < SRN_SHM_NAMES; k++) {
		if (k == SHM_DEV_NAMES) {
			/* Every /dev/shm name is someone else's: the user's own
			 * directory, which nobody else can create in when it is
			 * under a private runtime directory. */
			const struct srn_rundir *d = srn_rundir_get(SRN_RUNDIR_LINK);
			if (d->fd < 0 || !name_in(path[k], sizeof(path[k]), d->path, loc->netns, local,
						  member, k))
				break;
		}
		int ret = create_at(path[k], loc);
		if (ret == -EEXIST) {
			if (!taken[0])
				describe(path[k], taken, sizeof(taken));
			continue;
		}
		if (ret)
			return ret;
		snprintf(name, namelen, "%s", path[k]);
		if (k)
			snprintf(note, notelen, "same-host inbox name %s is taken by %s: using %s",
				 path[0] + strlen(SHM_DIR), taken,
				 k < SHM_DEV_NAMES ? path[k] + strlen(SHM_DIR) : path[k]);
		return 0;
	}
	const char *dir_note = srn_rundir_note(SRN_RUNDIR_LINK);
	snprintf(note, notelen,
		 "same-host inbox name %s and its -alt1..%u are taken, the first by %s: this "
		 "device receives over UDP only%s%s", path[0] + strlen(SHM_DIR), SHM_DEV_NAMES - 1,
		 taken, dir_note ? "; " : "", dir_note ? dir_note : "");
	return -EEXIST;
}

int srn_shm_locator_read(uint64_t netns, const struct sockaddr *dst, unsigned member, unsigned k,
			 struct srn_shm_locator *loc)
{
	char path[SRN_SHM_NAME_MAX];
	if (!srn_shm_name(path, sizeof(path), netns, dst, member, k))
		return k == SHM_DEV_NAMES && name_in(path, sizeof(path), NULL, netns, dst, member, 0) ?
			       -ENOENT : -EAFNOSUPPORT;   /* no directory of ours: nothing there */
	int fd = open(path, O_RDONLY | OPEN_SAFE);
	if (fd < 0)
		return -errno;
	int ret = srn_shm_file_ours(fd, (long long)sizeof(*loc));
	/* pread, not a mapping: a file that shrinks now is a short read. */
	if (!ret && pread(fd, loc, sizeof(*loc), 0) != (ssize_t)sizeof(*loc))
		ret = -EIO;
	close(fd);
	if (ret)
		return ret;
	if (loc->magic != SRN_SHM_LOC_MAGIC || loc->layout != SRN_SHM_LAYOUT || loc->netns != netns ||
	    loc->pid <= 0 || loc->fd < 0)
		return -ENOENT;
	return 0;
}

/* Read the locator (or layout-1 header) at path if it is ours. */
static bool read_ours(const char *path, struct srn_shm_locator *loc, struct stat *st)
{
	int fd = open(path, O_RDONLY | OPEN_SAFE);
	if (fd < 0)
		return false;
	bool ok = fstat(fd, st) == 0 && S_ISREG(st->st_mode) && st->st_uid == geteuid() &&
		  pread(fd, loc, sizeof(*loc), 0) >= (ssize_t)offsetof(struct srn_shm_locator, direct_fd);
	close(fd);
	return ok;
}

/* Unlink path if it still is the file looked at (inode and device). */
static void unlink_same(const char *path, const struct stat *was)
{
	struct stat now;
	if (lstat(path, &now) == 0 && now.st_ino == was->st_ino && now.st_dev == was->st_dev)
		unlink(path);
}

void srn_shm_locator_remove(const char *name, uint64_t cookie)
{
	struct srn_shm_locator loc;
	struct stat st;
	if (read_ours(name, &loc, &st) && st.st_size == (off_t)sizeof(loc) &&
	    loc.magic == SRN_SHM_LOC_MAGIC && loc.cookie == cookie)
		unlink_same(name, &st);
}

void srn_shm_sweep(void)
{
	DIR *d = opendir(SHM_DIR);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, SHM_PREFIX, strlen(SHM_PREFIX)))
			continue;
		char path[NAME_MAX + sizeof(SHM_DIR)];
		struct srn_shm_locator loc;
		struct stat st;
		snprintf(path, sizeof(path), SHM_DIR "%s", e->d_name);
		if (read_ours(path, &loc, &st) &&
		    (loc.magic == SRN_SHM_LOC_MAGIC || loc.magic == SRN_SHM_OLD_MAGIC) &&
		    !srn_shm_pid_alive(loc.pid))
			unlink_same(path, &st);
	}
	closedir(d);
}
