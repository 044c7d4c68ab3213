/*
 * peer_watch.c - a same-host peer process that dies ends its connections
 * at once.
 *
 * A kernel's CM learns that a process died because the kernel closes the
 * process's rdma_cm file and sends DREQs (or REJs) for every connection it
 * had.  A softrnic process killed with SIGKILL sends nothing; its peers
 * would see DISCONNECTED only when their own DREQ runs out of retries
 * (15 × 4.8 s).  On one host we can do what the kernel does for it: the
 * peer's device is owned by a process we can name (softrnic_peer_pid, from
 * the same-host link's locator, under the link's checks: our user, this
 * network namespace), so the CM thread watches a pidfd of it and, when it
 * becomes readable, treats every connection to that device as the peer's
 * kernel would have ended it (srn_cm_peer_died, from cm/thread.c).
 *
 * One watch per peer process, SRN_CM_NWATCH at most; each id remembers
 * the process it was connected to (a device address outlives its owner: a
 * new process may own it later, and its connections must not end with
 * the old one's death).  A watch that no connection uses any more is
 * reused.  Peers on other hosts, or with the
 * same-host rings off (SOFTRNIC_SHM=0), have no locator: their connections
 * end by the CM's timeouts as before.  Must hold srn_cm.lock.
 */
#include "cm/peer_watch.h"
#include "cm/qp1.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434             /* Linux 5.3, every architecture */
#endif

#define SRN_CM_NWATCH 32

/* libibverbs.so.1's private entry point (src/verbs/verbs_gsi.c). */
int softrnic_peer_pid(struct ibv_context *ctx, const union ibv_gid *gid, uint32_t qpn);

struct peer_watch {
	int fd;                        /* pidfd, in srn_cm.epfd; -1: slot free */
	pid_t pid;
};

static struct peer_watch watches[SRN_CM_NWATCH];
static bool watches_ready;

static void watches_init(void)
{
	if (watches_ready)
		return;
	for (int i = 0; i < SRN_CM_NWATCH; i++)
		watches[i].fd = -1;
	watches_ready = true;
}

/* Does a connection still go to this watch's process? */
static bool watch_used(const struct peer_watch *w)
{
	for (struct srn_cm_id *id = srn_cm.ids; id; id = id->next)
		if (id->peer_pid == w->pid && id->state >= SRN_CMS_REQ_SENT && id->state < SRN_CMS_TIMEWAIT)
			return true;
	return false;
}

static void watch_close(struct peer_watch *w)
{
	epoll_ctl(srn_cm.epfd, EPOLL_CTL_DEL, w->fd, NULL);
	close(w->fd);
	w->fd = -1;
}

static struct peer_watch *watch_slot(void)
{
	for (int i = 0; i < SRN_CM_NWATCH; i++)
		if (watches[i].fd < 0)
			return &watches[i];
	for (int i = 0; i < SRN_CM_NWATCH; i++)
		if (!watch_used(&watches[i])) {
			watch_close(&watches[i]);
			return &watches[i];
		}
	return NULL;
}

void srn_cm_watch_peer(struct srn_cm_id *id)
{
	watches_init();
	if (!id->dev)
		return;
	union ibv_gid g;
	memcpy(g.raw, id->peer_gid, 16);
	int pid = softrnic_peer_pid(id->dev->ctx, &g, id->remote_qpn);
	if (pid <= 0 || pid == getpid())
		return;                /* another host, no rings, or ourselves */
	for (int i = 0; i < SRN_CM_NWATCH; i++)
		if (watches[i].fd >= 0 && watches[i].pid == pid) {
			id->peer_pid = pid;
			return;
		}
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return;
	/* The pid may have been reused between the look-up and the open: the
	 * locator must still name it now that the pidfd pins the process. */
	if (softrnic_peer_pid(id->dev->ctx, &g, id->remote_qpn) != pid) {
		close(fd);
		return;
	}
	struct peer_watch *w = watch_slot();
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = w };
	if (!w || epoll_ctl(srn_cm.epfd, EPOLL_CTL_ADD, fd, &ev)) {
		close(fd);
		return;
	}
	w->fd = fd;
	w->pid = pid;
	id->peer_pid = pid;
}

bool srn_cm_watch_fired(void *ptr, pid_t *dead)
{
	if ((char *)ptr < (char *)watches || (char *)ptr >= (char *)(watches + SRN_CM_NWATCH))
		return false;
	struct peer_watch *w = ptr;
	*dead = 0;
	if (w->fd < 0)
		return true;           /* closed after epoll_wait returned it */
	*dead = w->pid;
	watch_close(w);
	return true;
}
