/* sock.h - socket helpers shared by the TCP server and client. */
#ifndef BS_SOCK_H
#define BS_SOCK_H

#include <sys/uio.h>

int bs_send_all(int fd, struct iovec *iov, int n);

#endif
