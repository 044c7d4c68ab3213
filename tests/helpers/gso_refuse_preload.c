/*
 * gso_refuse_preload.c - LD_PRELOAD library for test_gso_refused.sh: a
 * path on which the kernel refuses UDP GSO (an IPsec route, or before
 * Linux 6.11 a device without TX checksum offload) with EIO.
 *
 * sendmsg with a UDP_SEGMENT control message fails with EIO.  sendmmsg
 * behaves as Linux's does when message k fails: messages before k are
 * sent and their count returned, the error itself is not reported; if the
 * first message fails, -1 with its errno.  GSO_REFUSE_REPORT=1 prints a
 * line on stderr for each refusal.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SOL_UDP
#define SOL_UDP 17
#endif
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

static int has_segment(const struct msghdr *h)
{
	struct msghdr *m = (struct msghdr *)h;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c))
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_SEGMENT)
			return 1;
	return 0;
}

/* One line per refusal, written at once: `softrnic perf --loopback`'s
 * server child may leave with _exit, past any exit handler. */
static void refuse(void)
{
	if (getenv("GSO_REFUSE_REPORT"))
		fprintf(stderr, "gso_refuse_preload: pid %d refused a GSO message\n", (int)getpid());
}

int sendmmsg(int fd, struct mmsghdr *mm, unsigned int n, int flags)
{
	int (*real)(int, struct mmsghdr *, unsigned int, int);
	*(void **)&real = dlsym(RTLD_NEXT, "sendmmsg");
	unsigned int k = 0;
	while (k < n && !has_segment(&mm[k].msg_hdr))
		k++;
	if (k == n)
		return real(fd, mm, n, flags);
	refuse();
	if (k == 0) {
		errno = EIO;
		return -1;
	}
	return real(fd, mm, k, flags);
}

ssize_t sendmsg(int fd, const struct msghdr *h, int flags)
{
	ssize_t (*real)(int, const struct msghdr *, int);
	*(void **)&real = dlsym(RTLD_NEXT, "sendmsg");
	if (has_segment(h)) {
		refuse();
		errno = EIO;
		return -1;
	}
	return real(fd, h, flags);
}
