/*
 * test_rundir.c - link/rundir.c's rules, in a network namespace of the
 * test's own (root; exit 77 otherwise), so no other process's directory
 * is involved:
 *
 *   - the group directory is /dev/shm/softrnic-grp-<euid>-<netns>, 0700,
 *     held ("held" locked shared), and the same on a second call;
 *   - a forked child that uses it, and one that does not, exit without
 *     removing it (the parent still holds it; the child's destructor
 *     must not convert the parent's lock);
 *   - a name another uid made first: the CM directory goes under a
 *     private $XDG_RUNTIME_DIR, the note names the squat once, and a
 *     reader's peek finds what the owner uses;
 *   - a directory of a dead namespace that nobody holds is removed by
 *     the next process that uses the kind; one whose file someone locks
 *     (an older softrnic's member) is left alone.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "link/rundir.h"

static unsigned long long netns(void)
{
	struct stat st;
	return stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

static bool is_dir_0700(const char *p)
{
	struct stat st;
	return lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700 &&
	       st.st_uid == geteuid();
}

/* Remove a directory of plain files. */
static void rm_dir(const char *p)
{
	DIR *d = opendir(p);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char f[512];
		snprintf(f, sizeof(f), "%s/%s", p, e->d_name);
		if (e->d_name[0] != '.')
			unlink(f);
	}
	if (d)
		closedir(d);
	rmdir(p);
}

/* Run fn in a child; its exit status. */
static int in_child(void (*fn)(void))
{
	pid_t pid = fork();
	if (pid == 0) {
		fn();
		exit(0);            /* destructors run: the point */
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void child_uses_grp(void)
{
	const struct srn_rundir *d = srn_rundir_get(SRN_RUNDIR_GRP);
	exit(d->fd >= 0 ? 0 : 1);
}

static void child_idle(void)
{
}

/* The temporary runtime directory, once ours inside it went at exit
 * (rundir.c's destructor, priority 999, runs before this one). */
static char xdg[] = "/tmp/srn-rundir-XXXXXX";
static bool xdg_made;

__attribute__((destructor(998))) static void xdg_remove(void)
{
	if (xdg_made)
		rmdir(xdg);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("SKIP: needs root (a network namespace of its own, a squat by uid 65534)\n");
		return 77;
	}
	if (unshare(CLONE_NEWNET)) {
		printf("SKIP: unshare(CLONE_NEWNET): %s\n", strerror(errno));
		return 77;
	}
	unsetenv("XDG_RUNTIME_DIR");
	unsigned long long ns = netns();
	char want[128], path[256];

	/* The group directory: name 0, ours, held, stable. */
	snprintf(want, sizeof(want), "/dev/shm/softrnic-grp-%u-%llx", (unsigned)geteuid(), ns);
	rm_dir(want);           /* a dead namespace's with our inode number */
	const struct srn_rundir *g = srn_rundir_get(SRN_RUNDIR_GRP);
	CHECK(g->fd >= 0 && !strcmp(g->path, want), "got '%s', want %s", g->path, want);
	CHECK(!g->note[0] && !srn_rundir_note(SRN_RUNDIR_GRP), "a note without a squat: %s", g->note);
	CHECK(is_dir_0700(want));
	snprintf(path, sizeof(path), "%s/held", want);
	int h = open(path, O_RDONLY);
	CHECK(h >= 0 && flock(h, LOCK_EX | LOCK_NB) != 0, "held is not held");
	if (h >= 0)
		close(h);
	CHECK(srn_rundir_get(SRN_RUNDIR_GRP) == g, "a second call opened another");

	/* Forked children leave it alone. */
	CHECK(in_child(child_uses_grp) == 0);
	CHECK(is_dir_0700(want), "a child that used the directory removed it");
	CHECK(in_child(child_idle) == 0);
	CHECK(is_dir_0700(want), "a child's exit removed its parent's directory");

	/* A squat of the CM directory's name: a private runtime directory. */
	char prim[128], fb[256];
	xdg_made = mkdtemp(xdg) != NULL;
	CHECK(xdg_made);
	setenv("XDG_RUNTIME_DIR", xdg, 1);
	snprintf(prim, sizeof(prim), "/dev/shm/softrnic-cm-%u-%llx", (unsigned)geteuid(), ns);
	snprintf(fb, sizeof(fb), "%s/softrnic-cm-%llx", xdg, ns);
	rm_dir(prim);           /* a dead namespace's with our inode number */
	CHECK(mkdir(prim, 0777) == 0 && chown(prim, 65534, 65534) == 0 && chmod(prim, 0777) == 0);
	CHECK(!srn_rundir_peek(SRN_RUNDIR_CM, path, sizeof(path)), "peek found %s", path);
	const struct srn_rundir *c = srn_rundir_get(SRN_RUNDIR_CM);
	CHECK(c->fd >= 0 && !strcmp(c->path, fb), "got '%s', want %s", c->path, fb);
	CHECK(strstr(c->note, "is taken by uid 65534 (directory, mode 0777)") && strstr(c->note, fb),
	      "note: %s", c->note);
	CHECK(srn_rundir_peek(SRN_RUNDIR_CM, path, sizeof(path)) && !strcmp(path, fb));
	CHECK(is_dir_0700(fb));
	struct stat st;
	CHECK(lstat(prim, &st) == 0 && st.st_uid == 65534, "the squat was touched");

	/* A dead namespace's directory: removed by the next user of the kind
	 * (a child: the sweep runs once per process), unless an older
	 * softrnic's member still locks a file in it. */
	char dead[128], live[128], f[192];
	snprintf(dead, sizeof(dead), "/dev/shm/softrnic-grp-%u-%llx", (unsigned)geteuid(), ns + 1000000);
	snprintf(live, sizeof(live), "/dev/shm/softrnic-grp-%u-%llx", (unsigned)geteuid(), ns + 1000001);
	rm_dir(dead);
	rm_dir(live);
	CHECK(mkdir(dead, 0700) == 0 && mkdir(live, 0700) == 0);
	snprintf(f, sizeof(f), "%s/10.0.0.1-4791.m0", dead);
	int fd = open(f, O_RDWR | O_CREAT, 0600);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	snprintf(f, sizeof(f), "%s/10.0.0.1-4791.m0", live);
	int lk = open(f, O_RDWR | O_CREAT, 0600);
	CHECK(lk >= 0 && flock(lk, LOCK_EX) == 0);
	CHECK(in_child(child_uses_grp) == 0);
	CHECK(lstat(dead, &st) != 0 && errno == ENOENT, "%s was not reclaimed", dead);
	CHECK(is_dir_0700(live), "%s was removed under a locked file", live);
	CHECK(is_dir_0700(want), "our own held directory was swept");
	if (lk >= 0)
		close(lk);
	unlink(f);
	snprintf(f, sizeof(f), "%s/held", live);
	unlink(f);
	rmdir(live);
	rmdir(dead);

	/* Ours go at exit (test_rundir_cleanup checks that); the squat and
	 * the temporary runtime directory are the test's to remove. */
	rmdir(prim);
	return srn_check_result();
}
