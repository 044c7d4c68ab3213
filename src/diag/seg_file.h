/*
 * seg_file.h - the diagnostic segment's file in a directory shared with
 * other users (/dev/shm): which directory may hold it, how it is created,
 * and how the files of dead processes are kept bounded.
 *
 * The segment lists every MR's address and rkey and every QP's QPN, PSN
 * and peer: with it another user could read and write registered memory.
 * So the file is readable by its owner only, and nothing another user put
 * in the directory is ever opened, followed, replaced or removed:
 *
 *   directory   SOFTRNIC_DIAG_DIR or /dev/shm, owned by us or root, and
 *               not writable by others unless sticky (where others cannot
 *               remove or rename our files); checked on the open fd
 *   file        created O_CREAT|O_EXCL|O_NOFOLLOW|O_NONBLOCK, 0600 after
 *               fchmod (whatever the umask), checked on the fd: a regular
 *               file of ours with one link and nothing in it
 *   name taken  by a stale segment of ours (our pid, a dead process or a
 *               closed device): replaced.  By anything else (another
 *               user's file, a FIFO, a symlink, a live segment): left
 *               alone, and the segment goes to softrnic.<pid>.<dev>.<hex>
 *               instead; the caller logs the note we return
 *   sweep       at every device open: our own segments of dead processes
 *               beyond the newest SRN_DIAG_KEEP_DEAD are removed, so
 *               post-mortems stay readable but do not pile up
 *
 * Every file looked at is first lstat'ed (fstatat AT_SYMLINK_NOFOLLOW) and
 * opened only when it is a regular file of ours, with O_NONBLOCK so that a
 * FIFO swapped in between cannot block us; the fd is checked again.
 */
#ifndef SRN_DIAG_SEG_FILE_H
#define SRN_DIAG_SEG_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Dead processes' segments kept per user when a device opens. */
#define SRN_DIAG_KEEP_DEAD 8

/* Open the segment directory after checking it may hold our files.
 * Returns the directory fd, or -errno with err saying why. */
int srn_diag_dir_open(char *err, size_t errlen);

/* Create the segment file of process pid (started at start_ticks, see
 * srn_diag_proc_stat) for device devname in dirfd: exclusively, 0600,
 * sized to size (sparse).  name gets the file name used; note a line for
 * the device log when the usual name was taken (empty otherwise).
 * Returns the fd, or -errno with err saying why. */
int srn_diag_file_create(int dirfd, const char *devname, int pid, uint64_t start_ticks,
			 size_t size, char *name, size_t namelen, char *note, size_t notelen,
			 char *err, size_t errlen);

/* Remove our own segments of dead processes in dirfd beyond the newest
 * keep (by creation time); never anything of another user, anything but
 * a regular file, or a file of a live process.  Bounded by the number of
 * directory entries it looks at.  Returns how many it removed. */
unsigned srn_diag_sweep(int dirfd, unsigned keep);

/* Unlink name in dirfd if it is still the file open as fd (the same
 * inode): another file put there in the meantime is left alone. */
int srn_diag_unlink_if_same(int dirfd, const char *name, int fd);

#endif
