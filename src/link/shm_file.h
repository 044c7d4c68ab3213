/*
 * shm_file.h - the files behind a same-host inbox, and who may use them.
 *
 * An inbox is a sealed memfd (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL):
 * nobody, not even its owner, can make it smaller, so no mapping of it can
 * ever fault for a page past its end (SIGBUS).  Peers find it through a
 * locator, a 48-byte file in /dev/shm under the inbox's name, that says
 * which process holds it and under which descriptor: a sender opens
 * /proc/PID/fd/FD, which the kernel allows only to the owner's own user
 * (and root).  A locator is read with pread, never mapped.
 *
 * Every file is checked on the descriptor we use, after opening it with
 * O_NOFOLLOW | O_NONBLOCK (a symlink fails, a FIFO does not block): a
 * regular file owned by our effective uid with mode exactly 0600, of the
 * expected size.  Anything else under one of our names belongs to someone
 * else: we never write to it, never remove it, and say so.
 *
 * Names: /dev/shm/softrnic-link-<netns>-<address>-<port>, then the same
 * with -alt1 .. -alt3 when another user holds the name before it, then
 * <netns>-<address>-<port> in the user's inbox directory of the network
 * namespace (link/rundir.h), which another user cannot take when the
 * user has a private runtime directory.  Member k > 0 of an address
 * shared by several processes (udp_group.h) adds -m<k> after the port.
 * Only the process that bound the address and port creates under these
 * names, so any file of our own user under one of them is a dead owner's.
 */
#ifndef SRN_LINK_SHM_FILE_H
#define SRN_LINK_SHM_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define SRN_SHM_NAMES 5                     /* the name, -alt1 .. -alt3, the user's directory */
#define SRN_SHM_NAME_MAX 256                /* a runtime directory + "<netns>-" + IPv6 ... */
#define SRN_SHM_LAYOUT 2                    /* the inbox header (shm.c); 1 was a file in /dev/shm */
#define SRN_SHM_LOC_MAGIC 0x324b4e494c4e5253ull  /* "SRNLINK2", little-endian */
#define SRN_SHM_OLD_MAGIC 0x314b4e494c4e5253ull  /* "SRNLINK1": layout 1, a mapped file */

/* The locator.  Its first 40 bytes line up with a layout-1 inbox header
 * (magic, then owner pid at byte 32), so one sweep retires both. */
struct srn_shm_locator {
	uint64_t magic;
	uint32_t layout;
	int32_t fd;                 /* the memfd, in the owner's descriptor table */
	uint64_t ring_bytes;
	uint64_t netns;
	int32_t pid;                /* the owner */
	int32_t direct_fd;          /* its direct-placement table (link/direct.h) + 1, 0 = none */
	uint64_t cookie;            /* random; the memfd's header carries the same */
};
_Static_assert(sizeof(struct srn_shm_locator) == 48, "locator layout");
_Static_assert(offsetof(struct srn_shm_locator, pid) == 32, "pid where layout 1 had it");

/* Inbox name k (0 .. SRN_SHM_NAMES-1) of the device bound to a, as a full
 * path.  False for addresses that never have one (multicast, other
 * families), and for the last name while the user has no inbox
 * directory (a reader's look: link/rundir.h's srn_rundir_peek). */
bool srn_shm_name(char *out, size_t n, uint64_t netns, const struct sockaddr *a, unsigned member,
		  unsigned k);

/* Is the open fd a regular file of our euid, mode exactly 0600, `size`
 * bytes (size < 0: any)?  0, or -EPERM (someone else's or wrong mode),
 * -EINVAL (wrong size or kind). */
int srn_shm_file_ours(int fd, long long size);

/* A new inbox memfd of `bytes`, mode 0600, its first `reserve` bytes
 * allocated, sealed against shrinking and growing.  fd or -errno. */
int srn_shm_memfd_create(size_t bytes, size_t reserve);
/* The same under another name (it shows in /proc/PID/maps). */
int srn_shm_memfd_create_named(const char *name, size_t bytes, size_t reserve);

/* Open the memfd a locator names, read-write, and check it: ours, 0600,
 * `bytes` long, sealed against shrinking.  fd or -errno. */
int srn_shm_memfd_open(const struct srn_shm_locator *loc, size_t bytes);
/* The same for descriptor pfd of process pid (the direct-placement table,
 * link/direct.h, whose descriptor the locator also names). */
int srn_shm_peer_fd_open(int32_t pid, int32_t pfd, size_t bytes);
/* The same, but at least `bytes` long (a region's memfd, sized past its
 * span so that the program can grow the mapping: core/mr_share.c). */
int srn_shm_peer_fd_open_min(int32_t pid, int32_t pfd, size_t bytes);

/* Publish loc for the device bound to local: remove files of our own user
 * under its names (dead owners'), then create the locator exclusively
 * under the first name nobody else holds.  Fills name (the path used);
 * note gets a line for the device log when a name was taken by someone
 * else, or when all were (then -EEXIST: no inbox, UDP only). */
int srn_shm_locator_publish(const struct srn_shm_locator *loc, const struct sockaddr *local,
			    unsigned member, char *name, size_t namelen, char *note, size_t notelen);

/* Read and check locator k of dst: ours, 0600, 48 bytes, the magic and
 * layout, the netns.  0 or -errno. */
int srn_shm_locator_read(uint64_t netns, const struct sockaddr *dst, unsigned member, unsigned k,
			 struct srn_shm_locator *loc);

/* Remove our locator `name` if it is still the one with `cookie`. */
void srn_shm_locator_remove(const char *name, uint64_t cookie);

/* Remove locators (and layout-1 inboxes) of our user whose owner is dead. */
void srn_shm_sweep(void);

/* A process that can still drain its inbox: it exists and is not a zombie. */
bool srn_shm_pid_alive(int32_t pid);

#endif
