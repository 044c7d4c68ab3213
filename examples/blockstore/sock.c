/*
 * sock.c - writev until everything is sent, for both TCP twins.  Blocking:
 * the sockets carry SO_SNDTIMEO, so a peer that stops reading fails the
 * call instead of holding the thread.
 */
#include "sock.h"

#include <errno.h>

int bs_send_all(int fd, struct iovec *iov, int n)
{
	while (n) {
		ssize_t k = writev(fd, iov, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -EIO;
		while (n && (size_t)k >= iov->iov_len) {
			k -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n) {
			iov->iov_base = (char *)iov->iov_base + k;
			iov->iov_len -= (size_t)k;
		}
	}
	return 0;
}
