/*
 * rundir.h - our per-user runtime directories, validated, and where they
 * go when someone else took the name first.
 *
 * softrnic keeps a few kinds of state shared by the processes of one user
 * (per network namespace where it says so): the address-sharing groups
 * (link/udp_group.c), the rdma_cm port files (cm/ports.c), same-host inbox
 * locators whose /dev/shm names are all taken (link/shm_file.c), and the
 * `softrnic run` user-namespace marker (tools/run_ns.c).  Each lives in a
 * directory of its kind, found under the first of these names that is
 * ours, else made under the first one we can make:
 *
 *   0  /dev/shm/softrnic-<kind>-<euid>[-<netns>]       the name it always had
 *   1  $XDG_RUNTIME_DIR/softrnic-<kind>[-<netns>]      these three only when
 *   2  /run/user/<euid>/softrnic-<kind>[-<netns>]      their parent is a
 *   3  /run/softrnic-<kind>[-<netns>]                  directory of our euid
 *                                                      nobody else may write
 *   4..6  name 0 with .alt1 .. .alt3
 *
 * Anyone can create any name in /dev/shm first; nobody but us (and root)
 * can create one in 1-3.  The order is the same for every process of the
 * user, and a name already ours wins over making one, so processes that
 * start while a squat comes and goes still meet in one directory.  A
 * directory is ours when the descriptor we opened (O_NOFOLLOW) is a
 * directory of our euid with no group or other bits; we make them 0700.
 *
 * Per-namespace kinds are held: each process using one keeps a shared
 * flock on its "held" file until it exits.  The process that leaves last
 * (the lock turns exclusive) removes the directory: renamed away from its
 * name first, then emptied.  One that was killed leaves it to the next
 * process of the user that uses the kind, which removes every such
 * directory nobody holds and whose files nobody locks (those of dead
 * network namespaces too).  So a directory must only be used while held,
 * and files are never used across a removal: a joiner that finds its
 * "held" file unlinked, or the directory moved, starts over.
 */
#ifndef SRN_LINK_RUNDIR_H
#define SRN_LINK_RUNDIR_H

#include <stdbool.h>
#include <stddef.h>

#define SRN_RUNDIR_PATH_MAX 192
#define SRN_RUNDIR_NOTE_MAX 384

enum srn_rundir_kind {
	SRN_RUNDIR_GRP,         /* per netns: address-sharing groups */
	SRN_RUNDIR_CM,          /* per netns: rdma_cm port files */
	SRN_RUNDIR_LINK,        /* per netns: inbox locators, when /dev/shm's names are taken */
	SRN_RUNDIR_RUN,         /* per user: `softrnic run`'s user-namespace marker */
	SRN_RUNDIR_KINDS
};

struct srn_rundir {
	int fd;                            /* the directory (O_DIRECTORY), -1: none usable */
	char path[SRN_RUNDIR_PATH_MAX];    /* its path, "" when none */
	/* One line for the device log when the directory is not name 0 or
	 * none was usable ("" otherwise). */
	char note[SRN_RUNDIR_NOTE_MAX];
};

/* This process's directory of `kind` (in its current network namespace
 * for per-namespace kinds): found or made at the first call, held until
 * exit.  Never NULL; fd < 0 when every name is someone else's (note
 * says so).  Thread-safe; a forked child gets its own. */
const struct srn_rundir *srn_rundir_get(enum srn_rundir_kind kind);

/* The note of `kind` if this process has looked for that directory and
 * took a fallback or found none, else NULL.  Does not look itself. */
const char *srn_rundir_note(enum srn_rundir_kind kind);

/* The path of an existing directory of `kind` that is ours (this
 * process's if it has one), without making or holding one: for a reader
 * that only looks for what another process published.  False if none. */
bool srn_rundir_peek(enum srn_rundir_kind kind, char *path, size_t n);

#endif
