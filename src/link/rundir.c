/*
 * rundir.c - our per-user runtime directories (see rundir.h): the names
 * tried in order, the checks on the descriptor, the hold that tells a
 * live directory from a dead one, and the removal by the last user.
 *
 * Invariants: a directory is used only through a descriptor whose fstat
 * said "directory, our euid, no group/other bits"; a per-namespace
 * directory is removed only by a process holding its "held" file's lock
 * exclusively, after no other file in it was found flock'ed by another
 * process (state of an older softrnic that does not know "held"), and
 * only after renaming it away from its name; a joiner locks "held"
 * shared and checks it is still linked in the directory still under its
 * name, so it never builds on a directory being removed.
 *
 * Compiled into libibverbs.so.1, librdmacm.so.1 (cm/ports.c) and the
 * softrnic tool (tools/run_ns.c): each has its own table of held
 * directories and removes its own at exit.
 */
#include "link/rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define HELD "held"
#define OPEN_SAFE (O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
#define NAMES 7                 /* name 0, three private parents, three .altN */
#define TRIES 4                 /* a directory removed under us: start over */
#define OWN_MAX 512             /* files of ours looked at when we leave */
#define EXIT_WAITS 40           /* 200 ms at most for a peer leaving with us */

static const struct kind_info {
	const char *name;
	bool per_netns;
	const char *what;               /* for the note */
	const char *without;            /* what the process does without one */
} kinds[SRN_RUNDIR_KINDS] = {
	[SRN_RUNDIR_GRP] = { "grp", true, "group directory",
			     "this device does not share its address" },
	[SRN_RUNDIR_CM] = { "cm", true, "rdma_cm port directory",
			    "ports are checked in this process only" },
	[SRN_RUNDIR_LINK] = { "inbox", true, "inbox directory", "UDP only" },
	[SRN_RUNDIR_RUN] = { "run", false, "run directory",
			     "this run gets a user namespace of its own" },
};

struct entry {
	struct srn_rundir d;
	enum srn_rundir_kind kind;
	unsigned long long netns;
	pid_t pid;                      /* whose: a forked child opens its own */
	int held_fd;                    /* flock'ed shared, -1: not a held kind */
	struct entry *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry *entries;           /* never freed: callers keep pointers */
static pid_t swept_pid[SRN_RUNDIR_KINDS];
static struct srn_rundir none = { .fd = -1 };   /* out of memory */

static unsigned long long netns_ino(void)
{
	struct stat st;
	return stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* A parent only we may create names in: a directory of our euid that
 * group and others cannot write ($XDG_RUNTIME_DIR, /run/user/<uid>, and
 * /run for root). */
static bool private_parent(const char *p, struct stat *st)
{
	return p && p[0] == '/' && stat(p, st) == 0 && S_ISDIR(st->st_mode) &&
	       st->st_uid == geteuid() && !(st->st_mode & 022);
}

/* Name i of a kind's directory (rundir.h's table); false if this name
 * does not apply here. */
static bool candidate(enum srn_rundir_kind kind, unsigned long long netns, unsigned i, char *out,
		      size_t n)
{
	const struct kind_info *k = &kinds[kind];
	char tail[64], parent[SRN_RUNDIR_PATH_MAX - 64];
	if (k->per_netns)
		snprintf(tail, sizeof(tail), "softrnic-%s-%llx", k->name, netns);
	else
		snprintf(tail, sizeof(tail), "softrnic-%s", k->name);
	unsigned euid = (unsigned)geteuid();
	struct stat st, xst;
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	bool xdg_ok = xdg && strlen(xdg) < sizeof(parent) && private_parent(xdg, &xst);
	int len;
	switch (i) {
	case 0:
	case 4:
	case 5:
	case 6:
		if (k->per_netns)
			len = snprintf(out, n, "/dev/shm/softrnic-%s-%u-%llx", k->name, euid, netns);
		else
			len = snprintf(out, n, "/dev/shm/softrnic-%s-%u", k->name, euid);
		if (i && len > 0 && (size_t)len < n)
			len += snprintf(out + len, n - (size_t)len, ".alt%u", i - 3);
		return len > 0 && (size_t)len < n;
	case 1:
		if (!xdg_ok)
			return false;
		snprintf(parent, sizeof(parent), "%s", xdg);
		break;
	case 2:
		snprintf(parent, sizeof(parent), "/run/user/%u", euid);
		/* The same directory as $XDG_RUNTIME_DIR: tried already. */
		if (!private_parent(parent, &st) ||
		    (xdg_ok && st.st_dev == xst.st_dev && st.st_ino == xst.st_ino))
			return false;
		break;
	default:
		snprintf(parent, sizeof(parent), "/run");
		if (!private_parent(parent, &st))
			return false;
		break;
	}
	len = snprintf(out, n, "%s/%s", parent, tail);
	return len > 0 && (size_t)len < n;
}

/* Open path as a directory of ours (made 0700 first if `make`): its
 * descriptor, -ENOENT, or -EPERM for a name someone else holds. */
static int open_dir(const char *path, bool make)
{
	if (make && mkdir(path, 0700) && errno != EEXIST)
		return -errno;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -EPERM;   /* ELOOP, ENOTDIR: not ours */
	struct stat st;
	if (fstat(fd, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* snprintf that may cut a long path short (a note, a copy checked by
 * the caller), without the compiler's truncation warning. */
__attribute__((format(printf, 3, 4))) static int fmt(char *out, size_t n, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	int len = vsnprintf(out, n, f, ap);
	va_end(ap);
	return len;
}

/* "uid 65534 (directory, mode 0777)" for the note. */
static void describe(const char *path, char *out, size_t n)
{
	struct stat st;
	if (lstat(path, &st)) {
		snprintf(out, n, "someone (%s)", strerror(errno));
		return;
	}
	const char *kind = S_ISDIR(st.st_mode) ? "directory" : S_ISREG(st.st_mode) ? "file"
		: S_ISLNK(st.st_mode) ? "symlink" : "special file";
	snprintf(out, n, "uid %u (%s, mode %04o)", (unsigned)st.st_uid, kind,
		 (unsigned)(st.st_mode & 07777));
}

static bool file_ours(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
}

/* Join the per-namespace directory dfd, opened at path: its "held" file
 * locked shared.  The lock, -EAGAIN when the directory was taken away
 * while we came in (start over), or -errno. */
static int hold(int dfd, const char *path)
{
	int h = openat(dfd, HELD, O_RDWR | O_CREAT | OPEN_SAFE, 0600);
	if (h < 0)
		return errno == ENOENT ? -EAGAIN : -errno;  /* ENOENT: the directory is gone */
	struct stat st;
	if (!file_ours(h)) {
		close(h);
		return -EPERM;
	}
	/* Blocking: an exclusive holder only looks and removes. */
	if (flock(h, LOCK_SH) || fstat(h, &st)) {
		int e = -errno;
		close(h);
		return e;
	}
	/* Its last user unlinks "held" only after moving the directory
	 * away from its name (remove_all): a "held" still linked in the
	 * directory still under its name is one nobody is removing. */
	struct stat ds, ps;
	if (st.st_nlink == 0 || fstat(dfd, &ds) || stat(path, &ps) || ds.st_dev != ps.st_dev ||
	    ds.st_ino != ps.st_ino) {
		close(h);
		return -EAGAIN;
	}
	return h;
}

/* Files of this process (device, inode) when it leaves: its own locks
 * (a group slot, the CM's alive file) do not keep a directory alive. */
struct own {
	unsigned n;
	bool full;
	dev_t dev[OWN_MAX];
	ino_t ino[OWN_MAX];
};

static void own_load(struct own *o)
{
	o->n = 0;
	o->full = false;
	DIR *d = opendir("/proc/self/fd");
	if (!d) {
		o->full = true;                 /* cannot tell: nothing is ours */
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		struct stat st;
		int fd = atoi(e->d_name);
		if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd == dirfd(d) || fstat(fd, &st) ||
		    !S_ISREG(st.st_mode))
			continue;
		if (o->n == OWN_MAX) {
			o->full = true;
			break;
		}
		o->dev[o->n] = st.st_dev;
		o->ino[o->n++] = st.st_ino;
	}
	closedir(d);
}

static bool is_own(const struct own *o, const struct stat *st)
{
	for (unsigned i = 0; o && i < o->n; i++)
		if (o->dev[i] == st->st_dev && o->ino[i] == st->st_ino)
			return true;
	return false;
}

/* Does another process hold a lock on a file in the directory?  (An
 * older softrnic's group slots and CM alive files, which know no "held".) */
static bool others_lock(int dfd, const struct own *own)
{
	int d2 = dup(dfd);
	DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
	if (!d) {
		if (d2 >= 0)
			close(d2);
		return true;
	}
	rewinddir(d);
	bool locked = false;
	struct dirent *e;
	while (!locked && (e = readdir(d))) {
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, HELD) ||
		    fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
		    is_own(own, &st))
			continue;
		int fd = openat(dfd, e->d_name, O_RDONLY | OPEN_SAFE);
		if (fd < 0)
			continue;
		locked = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
		close(fd);
	}
	closedir(d);
	return locked;
}

/* Remove the directory at path (dfd), whose "held" we lock exclusively.
 * First it leaves its name (renamed to <path>.gone-<pid>), so a joiner
 * that comes now makes a new one, and one that opened it before sees it
 * moved (hold); only then are its files and "held" removed by name,
 * which no joiner can create again there. */
#define GONE ".gone-"
static void remove_all(int dfd, const char *path)
{
	char gone[SRN_RUNDIR_PATH_MAX + 24];
	/* Still the directory at path: it leaves its name only under the
	 * lock of its linked "held", which we hold, so this stays true. */
	struct stat ds, ps;
	if (fstat(dfd, &ds) || lstat(path, &ps) || ds.st_dev != ps.st_dev || ds.st_ino != ps.st_ino)
		return;
	if (strstr(path, GONE))
		fmt(gone, sizeof(gone), "%s", path);     /* a sweep finishing a dead leaver's work */
	else if ((size_t)fmt(gone, sizeof(gone), "%s" GONE "%d", path, (int)getpid()) >= sizeof(gone) ||
		 rename(path, gone))
		return;
	int d2 = dup(dfd);
	DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
	if (!d) {
		if (d2 >= 0)
			close(d2);
		return;                 /* left under .gone-: the next sweep */
	}
	rewinddir(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		struct stat st;
		if (strcmp(e->d_name, HELD) && !fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) &&
		    !S_ISDIR(st.st_mode))
			unlinkat(dfd, e->d_name, 0);
	}
	closedir(d);
	unlinkat(dfd, HELD, 0);
	rmdir(gone);
}

/* Remove the directory if nobody else uses it.  held: our own shared
 * lock on its "held" file (we are leaving), or -1 (a sweep).  waits:
 * how many 5 ms pauses another process's locks on files may take to go:
 * processes that leave together each see the other's files still locked
 * (a CM's alive file); the one that wins "held" waits for the other to
 * be gone. */
static bool reclaim(int dfd, const char *path, int held, const struct own *own, int waits)
{
	int h = held >= 0 ? held : openat(dfd, HELD, O_RDWR | O_CREAT | OPEN_SAFE, 0600);
	if (h < 0)
		return false;
	struct stat st;
	/* A failed conversion leaves no lock: whoever tries next wins. */
	bool gone = file_ours(h) && flock(h, LOCK_EX | LOCK_NB) == 0 && fstat(h, &st) == 0 &&
		    st.st_nlink > 0;
	for (int i = 0; gone && others_lock(dfd, own); i++) {
		if (i == waits)
			gone = false;
		else
			usleep(5000);
	}
	if (gone)
		remove_all(dfd, path);
	if (held < 0)
		close(h);
	return gone;
}

/* Remove the directories of this kind that nobody holds, in every
 * parent: those of dead network namespaces, and ours of a killed
 * process.  Once per process and kind. */
static void sweep(enum srn_rundir_kind kind)
{
	const struct kind_info *k = &kinds[kind];
	for (unsigned i = 0; i < 4; i++) {
		char probe[SRN_RUNDIR_PATH_MAX], prefix[64];
		/* Name i of namespace 0 tells the parent and the prefix. */
		if (!candidate(kind, 0, i, probe, sizeof(probe)))
			continue;
		char *slash = strrchr(probe, '/');
		*slash = '\0';
		if (i == 0)
			snprintf(prefix, sizeof(prefix), "softrnic-%s-%u-", k->name, (unsigned)geteuid());
		else
			snprintf(prefix, sizeof(prefix), "softrnic-%s-", k->name);
		DIR *d = opendir(probe);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d))) {
			char path[SRN_RUNDIR_PATH_MAX];
			if (strncmp(e->d_name, prefix, strlen(prefix)) ||
			    (size_t)snprintf(path, sizeof(path), "%s/%s", probe, e->d_name) >= sizeof(path))
				continue;
			int dfd = open_dir(path, false);
			if (dfd < 0)
				continue;
			reclaim(dfd, path, -1, NULL, 0);
			close(dfd);
		}
		closedir(d);
	}
}

/* Find or make e's directory.  0, -EAGAIN (start over), -EPERM (none). */
static int choose(struct entry *e)
{
	const struct kind_info *k = &kinds[e->kind];
	char path[NAMES][SRN_RUNDIR_PATH_MAX], taken[96] = "";
	bool have[NAMES];
	for (unsigned i = 0; i < NAMES; i++)
		have[i] = candidate(e->kind, e->netns, i, path[i], sizeof(path[i]));
	/* Pass 0: a directory already ours (another process may be there);
	 * pass 1: make one. */
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < NAMES; i++) {
			if (!have[i])
				continue;
			int fd = open_dir(path[i], pass == 1);
			if (fd < 0) {
				if (pass == 1 && fd == -EPERM && !taken[0])
					describe(path[i], taken, sizeof(taken));
				continue;
			}
			int h = -1;
			if (k->per_netns && (h = hold(fd, path[i])) < 0) {
				close(fd);
				if (h == -EAGAIN)
					return -EAGAIN;
				continue;
			}
			e->d.fd = fd;
			e->held_fd = h;
			fmt(e->d.path, sizeof(e->d.path), "%s", path[i]);
			if (i == 0)
				return 0;
			int f0 = open_dir(path[0], false);
			if (f0 >= 0)
				close(f0);
			if (f0 == -ENOENT) {
				/* A squat came and went: the user's processes are here. */
				fmt(e->d.note, sizeof(e->d.note),
					 "%s %s was taken: using %s, where this user's processes are",
					 k->what, path[0], path[i]);
			} else {
				char first[96];
				describe(path[0], first, sizeof(first));
				fmt(e->d.note, sizeof(e->d.note), "%s %s is taken by %s: using %s",
					 k->what, path[0], first, path[i]);
			}
			return 0;
		}
	}
	fmt(e->d.note, sizeof(e->d.note),
		 "%s %s and its fallbacks are taken (the first by %s): %s", k->what, path[0],
		 taken[0] ? taken : "someone", k->without);
	return -EPERM;
}

static struct entry *open_entry(enum srn_rundir_kind kind, unsigned long long netns)
{
	struct entry *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->kind = kind;
	e->netns = netns;
	e->pid = getpid();
	e->d.fd = e->held_fd = -1;
	if (kinds[kind].per_netns && swept_pid[kind] != e->pid) {
		swept_pid[kind] = e->pid;
		sweep(kind);
	}
	int t = 0;
	while (choose(e) == -EAGAIN && ++t < TRIES)
		;
	if (t == TRIES)
		fmt(e->d.note, sizeof(e->d.note), "%s: removed under us %d times: %s",
		    kinds[kind].what, TRIES, kinds[kind].without);
	e->next = entries;
	entries = e;
	return e;
}

static struct entry *find(enum srn_rundir_kind kind, unsigned long long netns)
{
	pid_t me = getpid();
	for (struct entry *e = entries; e; e = e->next)
		if (e->kind == kind && e->netns == netns && e->pid == me)
			return e;
	return NULL;
}

const struct srn_rundir *srn_rundir_get(enum srn_rundir_kind kind)
{
	unsigned long long netns = kinds[kind].per_netns ? netns_ino() : 0;
	pthread_mutex_lock(&lock);
	struct entry *e = find(kind, netns);
	if (!e)
		e = open_entry(kind, netns);
	pthread_mutex_unlock(&lock);
	return e ? &e->d : &none;
}

const char *srn_rundir_note(enum srn_rundir_kind kind)
{
	unsigned long long netns = kinds[kind].per_netns ? netns_ino() : 0;
	pthread_mutex_lock(&lock);
	struct entry *e = find(kind, netns);
	pthread_mutex_unlock(&lock);
	return e && e->d.note[0] ? e->d.note : NULL;
}

bool srn_rundir_peek(enum srn_rundir_kind kind, char *out, size_t n)
{
	unsigned long long netns = kinds[kind].per_netns ? netns_ino() : 0;
	pthread_mutex_lock(&lock);
	struct entry *e = find(kind, netns);
	bool found = e && e->d.fd >= 0 && (size_t)snprintf(out, n, "%s", e->d.path) < n;
	pthread_mutex_unlock(&lock);
	if (e)
		return found;
	for (unsigned i = 0; i < NAMES; i++) {
		char path[SRN_RUNDIR_PATH_MAX];
		if (!candidate(kind, netns, i, path, sizeof(path)))
			continue;
		int fd = open_dir(path, false);
		if (fd < 0)
			continue;
		close(fd);
		return (size_t)snprintf(out, n, "%s", path) < n;
	}
	return false;
}

/* The last user out removes the directory (rundir.h).  After the plain
 * destructors and engine/nic.c's exit flush (priority 1000), so nothing
 * of ours writes there after it; a forked child leaves its parent's. */
__attribute__((destructor(999))) static void rundir_at_exit(void)
{
	if (pthread_mutex_trylock(&lock))
		return;                 /* a thread the exit cut off holds it */
	static struct own own;          /* large: not on the stack */
	bool loaded = false;
	pid_t me = getpid();
	for (struct entry *e = entries; e; e = e->next) {
		if (e->pid != me || e->held_fd < 0)
			continue;
		if (!loaded) {
			own_load(&own);
			loaded = true;
		}
		reclaim(e->d.fd, e->d.path, e->held_fd, own.full ? NULL : &own, EXIT_WAITS);
	}
	pthread_mutex_unlock(&lock);
}
