/*
 * steer.c - the CM behind a device address that several processes share
 * (link/udp_group.h).
 *
 * Every MAD to a shared address goes to QP1, which is member 0's (its
 * QPN carries member bits 0), so member 0's CM sees the MADs of all the
 * processes behind the address, as a host's one kernel CM would.  It
 * passes each on to the CM it belongs to:
 *
 * - a REQ or SIDR_REQ to the process that holds the listening port (the
 *   port files, cm/ports.c, name its pid), unless that is us;
 * - anything else (REP, RTU, DREQ, REJ, MRA, SIDR_REP ...) names a
 *   communication ID only its owner knows: it goes to every other CM
 *   behind the address, and each one that does not know the ID drops it
 *   as it drops any stray MAD (an unknown DREQ gets a DREP, which the
 *   peer ignores as a duplicate).  We handle it too.
 *
 * The channel: one Unix datagram socket per process and device address,
 * /dev/shm/softrnic-cmsteer-<euid>-<netns>/mad-<address>-<pid> (0700,
 * ours, checked; a name whose pid is gone is removed by whoever sees it).  A message is the device's GID, the
 * MAD's source GID and the MAD.  A forwarded MAD is never forwarded
 * again.  MADs are few (connection setup), so the per-MAD directory scan
 * costs nothing that matters; a full socket (10 datagrams) loses a MAD,
 * which its sender retries.
 */
#include "cm/steer.h"
#include "cm/qp1.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cm/mad.h"

#define PORTS_DIR_FMT "/dev/shm/softrnic-cm-%u-%llx"        /* cm/ports.c's */
#define STEER_DIR_FMT "/dev/shm/softrnic-cmsteer-%u-%llx"
#define STEER_MAGIC 0x52454554u         /* "TEER" */

struct steer_msg {
	uint32_t magic;
	uint32_t len;
	uint8_t dev_gid[16];
	uint8_t src_gid[16];
	uint8_t mad[SRN_MAD_LEN];
};

static struct steer_sock {
	int fd;
	char ip[INET6_ADDRSTRLEN];
} socks[SRN_CM_MAX_DEV];
static char dir[64], ports_dir[64];

static void dev_ip(const struct srn_cm_dev *d, char *out, size_t n)
{
	if (d->addr.ss_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)&d->addr)->sin_addr, out, (socklen_t)n);
	else
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&d->addr)->sin6_addr, out, (socklen_t)n);
}

static bool sock_path(struct sockaddr_un *sun, const char *ip, long pid)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	return (size_t)snprintf(sun->sun_path, sizeof(sun->sun_path), "%s/mad-%s-%ld", dir, ip, pid) <
	       sizeof(sun->sun_path);
}

/* Our sockets' directory, created 0700 if missing, used only if ours. */
static bool dir_ok(void)
{
	struct stat st;
	unsigned long long netns = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0;
	snprintf(dir, sizeof(dir), STEER_DIR_FMT, (unsigned)geteuid(), netns);
	snprintf(ports_dir, sizeof(ports_dir), PORTS_DIR_FMT, (unsigned)geteuid(), netns);
	if (mkdir(dir, 0700) && errno != EEXIST)
		return false;
	return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	       !(st.st_mode & 077);
}

/* Must hold srn_cm.lock, after the devices are open. */
void srn_cm_steer_open(void)
{
	for (int i = 0; i < SRN_CM_MAX_DEV; i++)
		socks[i].fd = -1;
	if (!dir_ok())
		return;
	for (int i = 0; i < srn_cm.ndev; i++) {
		struct sockaddr_un sun;
		dev_ip(&srn_cm.dev[i], socks[i].ip, sizeof(socks[i].ip));
		if (!sock_path(&sun, socks[i].ip, (long)getpid()))
			continue;
		unlink(sun.sun_path);          /* a dead process with our pid */
		int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &socks[i] };
		if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) ||
		    epoll_ctl(srn_cm.epfd, EPOLL_CTL_ADD, fd, &ev)) {
			close(fd);
			unlink(sun.sun_path);
			continue;
		}
		socks[i].fd = fd;
	}
}

/* At exit: our sockets' names go (the descriptors with the process). */
void srn_cm_steer_close(void)
{
	for (int i = 0; i < srn_cm.ndev; i++) {
		struct sockaddr_un sun;
		if (socks[i].fd >= 0 && sock_path(&sun, socks[i].ip, (long)getpid()))
			unlink(sun.sun_path);
	}
}

static bool send_to(int from, const char *ip, long pid, const struct srn_cm_dev *d,
		    const uint8_t *mad, size_t len, const uint8_t src_gid[16])
{
	struct sockaddr_un sun;
	if (!sock_path(&sun, ip, pid))
		return false;
	struct steer_msg m = { .magic = STEER_MAGIC, .len = (uint32_t)len };
	memcpy(m.dev_gid, d->gid, 16);
	memcpy(m.src_gid, src_gid, 16);
	memcpy(m.mad, mad, len);
	return sendto(from, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&sun,
		      sizeof(sun)) == (ssize_t)sizeof(m);
}

/* The live process that holds port `port` of port space `ps`, or 0. */
static long listener_pid(uint16_t ps, uint16_t port)
{
	DIR *dp = opendir(ports_dir);
	if (!dp)
		return 0;
	long found = 0;
	struct dirent *e;
	while (!found && (e = readdir(dp))) {
		unsigned fps, fport, n;
		int pid;
		if (sscanf(e->d_name, "%4x-%5u-%d-%u", &fps, &fport, &pid, &n) == 4 && fps == ps &&
		    fport == port && pid > 0 && kill(pid, 0) == 0)
			found = pid;
	}
	closedir(dp);
	return found;
}

/* A MAD that came from the wire to device d: true when it went to the
 * CM it belongs to and is not ours to handle.  Must hold srn_cm.lock. */
bool srn_cm_steer_mad(struct srn_cm_dev *d, const uint8_t *mad, size_t len,
		      const uint8_t src_gid[16])
{
	int i = (int)(d - srn_cm.dev);
	if (i < 0 || i >= srn_cm.ndev || socks[i].fd < 0 || len > SRN_MAD_LEN)
		return false;
	struct srn_cm_msg m;
	if (srn_cm_mad_parse(mad, len, &m))
		return false;                  /* ours to count as malformed */
	long self = (long)getpid();
	if (m.attr == SRN_CM_ATTR_REQ || m.attr == SRN_CM_ATTR_SIDR_REQ) {
		uint64_t sid = m.attr == SRN_CM_ATTR_REQ ? m.req.service_id : m.sidr_req.service_id;
		if ((sid & SRN_CMA_SID_PREFIX_MASK) != SRN_CMA_SID_PREFIX)
			return false;
		long pid = listener_pid((uint16_t)(sid >> 16), (uint16_t)sid);
		return pid && pid != self && send_to(socks[i].fd, socks[i].ip, pid, d, mad, len, src_gid);
	}
	/* Everyone else behind this address: mad-<ip>-<pid>. */
	char prefix[INET6_ADDRSTRLEN + 8];
	int pl = snprintf(prefix, sizeof(prefix), "mad-%s-", socks[i].ip);
	DIR *dp = opendir(dir);
	if (!dp)
		return false;
	struct dirent *e;
	while ((e = readdir(dp))) {
		char *end;
		if (strncmp(e->d_name, prefix, (size_t)pl))
			continue;
		long pid = strtol(e->d_name + pl, &end, 10);
		if (*end || pid <= 0 || pid == self)
			continue;
		if (kill((pid_t)pid, 0) && errno == ESRCH) {
			struct sockaddr_un sun;
			if (sock_path(&sun, socks[i].ip, pid))
				unlink(sun.sun_path);  /* a dead process's name */
			continue;
		}
		send_to(socks[i].fd, socks[i].ip, pid, d, mad, len, src_gid);
	}
	closedir(dp);
	return false;
}

/* An epoll event of the CM thread: one of our sockets?  Then handle what
 * other CMs passed to us.  Must hold srn_cm.lock. */
bool srn_cm_steer_fired(void *ptr, srn_cm_mad_fn *deliver)
{
	if ((char *)ptr < (char *)socks || (char *)ptr >= (char *)(socks + SRN_CM_MAX_DEV))
		return false;
	struct steer_sock *s = ptr;
	struct srn_cm_dev *d = &srn_cm.dev[s - socks];
	struct steer_msg m;
	for (int k = 0; k < 64; k++) {
		ssize_t n = recv(s->fd, &m, sizeof(m), MSG_DONTWAIT);
		if (n < 0)
			break;
		/* Only our own user can reach this socket; still, a message
		 * that lies about its size is dropped. */
		if (n != (ssize_t)sizeof(m) || m.magic != STEER_MAGIC || m.len > SRN_MAD_LEN ||
		    memcmp(m.dev_gid, d->gid, 16))
			continue;
		deliver(d, m.mad, m.len, m.src_gid);
	}
	return true;
}
