/*
 * seg_file.c - the directory check, exclusive creation and sweep of the
 * diagnostic segment files (the rules: seg_file.h).
 *
 * Invariants:
 * - Nothing is opened by path: everything is relative to the checked
 *   directory fd, and a name is opened only after fstatat without
 *   following links said it is a regular file of ours, then with
 *   O_NOFOLLOW|O_NONBLOCK (a FIFO swapped in cannot block us) and checked
 *   again on the fd.
 * - We remove only our own regular files, and only after checking on the
 *   fd that they hold a segment of a process that is gone; the unlink
 *   re-checks that the name still names that inode.
 * - Every loop is bounded: names tried, directory entries looked at.
 */
#include "diag/seg_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "diag/shm.h"

#define SWEEP_MAX_ENTRIES 8192   /* directory entries looked at per sweep */
#define SWEEP_MAX_DEAD 1024      /* dead segments considered per sweep */

static const char *dir_path(void)
{
	const char *dir = getenv(SRN_DIAG_DIR_ENV);
	return dir && *dir ? dir : SRN_DIAG_DEFAULT_DIR;
}

/* Inside the user namespace `softrnic run` makes for an ordinary user,
 * root's files show as owned by the overflow uid, so a root-owned /dev/shm
 * cannot be told from another user's. `run` checks the directory before
 * entering the namespace and names it (st_dev:st_ino) in this variable. */
static bool root_dir_vouched(const struct stat *st)
{
	const char *v = getenv("SOFTRNIC_DIAG_DIR_ROOT");
	unsigned long long dev, ino;
	return v && sscanf(v, "%llu:%llu", &dev, &ino) == 2 &&
	       dev == (unsigned long long)st->st_dev && ino == (unsigned long long)st->st_ino;
}

int srn_diag_dir_open(char *err, size_t errlen)
{
	const char *dir = dir_path();
	/* The directory itself may be reached through a link (/dev/shm is one
	 * on some systems): what is checked is the directory we ended in. */
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(e));
		return -e;
	}
	struct stat st;
	const char *why = NULL;
	if (fstat(fd, &st))
		why = strerror(errno);
	else if (st.st_uid != geteuid() && st.st_uid != 0 && !root_dir_vouched(&st))
		why = "owned by another user, who could replace our files";
	else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
		why = "writable by others and not sticky: they could replace our files";
	if (why) {
		snprintf(err, errlen, "%s: %s (%s)", dir, why, SRN_DIAG_DIR_ENV);
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* The header of a segment file name in dirfd, checked: a regular file of
 * ours, one link.  Returns 0 and fills h (and *st) or -errno. */
static int read_own_header(int dirfd, const char *name, struct srn_diag_hdr *h,
			   struct stat *st)
{
	if (fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	if (!S_ISREG(st->st_mode) || st->st_uid != geteuid() || st->st_nlink != 1)
		return -EPERM;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	struct stat fst;
	int ret = 0;
	if (fstat(fd, &fst))
		ret = -errno;
	else if (fst.st_ino != st->st_ino || fst.st_dev != st->st_dev || !S_ISREG(fst.st_mode) ||
		 fst.st_uid != geteuid())
		ret = -EPERM;   /* swapped since the fstatat */
	else if (pread(fd, h, sizeof(*h), 0) != (ssize_t)sizeof(*h))
		ret = -ENODATA;
	close(fd);
	return ret;
}

/* A segment of ours whose writer is gone (its pid is dead, or was reused
 * by a process started at another time), or, with the same pid and start
 * time as us, one whose device was closed: its name may be reused. */
static bool stale_segment(const struct srn_diag_hdr *h, int name_pid, int pid,
			  uint64_t start_ticks)
{
	if (h->magic != SRN_DIAG_MAGIC || h->pid != name_pid)
		return false;   /* not a segment we know: not ours to judge */
	if (h->pid == pid && h->proc_start_ticks == start_ticks)
		return h->closed != 0;
	return !srn_diag_proc_alive(h->pid, h->proc_start_ticks);
}

/* What is at the taken name, in words for the device log. */
static void describe_taken(int dirfd, const char *name, char *buf, size_t len)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		snprintf(buf, len, "%s", strerror(errno));
		return;
	}
	const char *type = S_ISREG(st.st_mode)    ? "a file"
			 : S_ISFIFO(st.st_mode)   ? "a FIFO"
			 : S_ISLNK(st.st_mode)    ? "a symbolic link"
			 : S_ISDIR(st.st_mode)    ? "a directory"
			 : S_ISSOCK(st.st_mode)   ? "a socket"
						  : "a device node";
	if (st.st_uid != geteuid())
		snprintf(buf, len, "%s of uid %u", type, (unsigned)st.st_uid);
	else if (!S_ISREG(st.st_mode))
		snprintf(buf, len, "%s", type);
	else
		snprintf(buf, len, "a file of ours that is not a stale segment");
}

/* A just-created file, checked on its fd before anything is written. */
static int check_new(int fd)
{
	struct stat st;
	if (fchmod(fd, 0600) || fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1 ||
	    (st.st_mode & 07777) != 0600 || st.st_size != 0)
		return -EPERM;
	return 0;
}

int srn_diag_file_create(int dirfd, const char *devname, int pid, uint64_t start_ticks,
			 size_t size, char *name, size_t namelen, char *note, size_t notelen,
			 char *err, size_t errlen)
{
	char dev[SRN_DIAG_NAME_LEN + 1];
	snprintf(dev, sizeof(dev), "%s", devname);
	for (char *c = dev; *c; c++)   /* a name is one path component */
		if (*c == '/')
			*c = '_';
	char usual[128];
	snprintf(usual, sizeof(usual), SRN_DIAG_FILE_PREFIX "%d.%s", pid, dev);
	snprintf(name, namelen, "%s", usual);
	note[0] = '\0';
	/* Tries: the usual name; the usual name again after removing our own
	 * stale segment there; a random name when it is someone else's. */
	bool replaced = false;
	for (int attempt = 0; attempt < 3; attempt++) {
		int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK |
						     O_CLOEXEC | O_NOCTTY,
				0600);
		if (fd >= 0) {
			int ret = check_new(fd);
			if (!ret && ftruncate(fd, (off_t)size))
				ret = -errno;
			if (!ret)
				return fd;
			snprintf(err, errlen, "%s: %s", name, strerror(-ret));
			srn_diag_unlink_if_same(dirfd, name, fd);
			close(fd);
			return ret;
		}
		int e = errno;
		if (e != EEXIST || strcmp(name, usual)) {
			snprintf(err, errlen, "%s: %s", name, strerror(e));
			return -e;
		}
		struct srn_diag_hdr h;
		struct stat st;
		if (!replaced && !read_own_header(dirfd, name, &h, &st) &&
		    stale_segment(&h, pid, pid, start_ticks) && !unlinkat(dirfd, name, 0)) {
			replaced = true;
			continue;
		}
		char what[96];
		describe_taken(dirfd, name, what, sizeof(what));
		uint32_t r;
		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
			r = (uint32_t)time(NULL) ^ (uint32_t)pid << 8;
		snprintf(name, namelen, "%s.%08x", usual, r);
		snprintf(note, notelen, "diagnostic file %s is taken by %s: left alone, using %s",
			 usual, what, name);
	}
	snprintf(err, errlen, "%s: no free name", usual);
	return -EEXIST;
}

int srn_diag_unlink_if_same(int dirfd, const char *name, int fd)
{
	struct stat a, b;
	if (fstat(fd, &a) || fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW))
		return -errno;
	if (a.st_ino != b.st_ino || a.st_dev != b.st_dev)
		return -ESTALE;
	return unlinkat(dirfd, name, 0) ? -errno : 0;
}

struct dead_seg {
	uint64_t started;       /* CLOCK_REALTIME at creation, from its header */
	dev_t dev;
	ino_t ino;
	char name[NAME_MAX + 1];
};

static int newest_first(const void *a, const void *b)
{
	const struct dead_seg *x = a, *y = b;
	return (x->started < y->started) - (x->started > y->started);
}

unsigned srn_diag_sweep(int dirfd, unsigned keep)
{
	int dfd = dup(dirfd);   /* closedir closes it; rewound below (shared offset) */
	if (dfd < 0)
		return 0;
	DIR *dp = fdopendir(dfd);
	if (!dp) {
		close(dfd);
		return 0;
	}
	rewinddir(dp);
	struct dead_seg *dead = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	for (unsigned seen = 0; seen < SWEEP_MAX_ENTRIES && n < SWEEP_MAX_DEAD && (de = readdir(dp));
	     seen++) {
		int pid = srn_diag_name_pid(de->d_name);
		if (pid < 0 || strlen(de->d_name) > NAME_MAX)
			continue;
		struct srn_diag_hdr h;
		struct stat st;
		if (read_own_header(dirfd, de->d_name, &h, &st) || h.magic != SRN_DIAG_MAGIC ||
		    h.pid != pid || srn_diag_proc_alive(h.pid, h.proc_start_ticks))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 32;
			struct dead_seg *v = realloc(dead, ncap * sizeof(*v));
			if (!v)
				break;
			dead = v;
			cap = ncap;
		}
		dead[n] = (struct dead_seg){ .started = h.start_realtime_ns, .dev = st.st_dev,
					     .ino = st.st_ino };
		snprintf(dead[n].name, sizeof(dead[n].name), "%s", de->d_name);
		n++;
	}
	closedir(dp);
	unsigned removed = 0;
	if (n > keep) {
		qsort(dead, n, sizeof(*dead), newest_first);
		for (size_t i = keep; i < n; i++) {
			struct stat st;
			/* Still the file we judged (ours, regular, same inode). */
			if (fstatat(dirfd, dead[i].name, &st, AT_SYMLINK_NOFOLLOW) ||
			    st.st_ino != dead[i].ino || st.st_dev != dead[i].dev ||
			    !S_ISREG(st.st_mode) || st.st_uid != geteuid())
				continue;
			if (!unlinkat(dirfd, dead[i].name, 0))
				removed++;
		}
	}
	free(dead);
	return removed;
}
