/* Tests for link/udp_group.c, in one process on loopback: four devices
 * bound to one address and port take members 0..3; the kernel steers each
 * packet to the socket of its destination QPN's member, also after a
 * member in the middle of the group's socket order closes (the kernel
 * moves the last socket into its place) and a newcomer takes the freed
 * member; with the steering program detached (the kernel's hash picks),
 * srn_udp_recv_batch forwards every packet to its owner and nothing is
 * lost; a doorbell for a member reaches that member.  The group's probes
 * (udp_group_probe.c) come to the sockets read raw here too: skipped.
 * Traffic to 127/8 only. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <linux/filter.h>
#include <unistd.h>

#include "check.h"
#include "diag/clock.h"
#include "link/gso.h"
#include "link/udp.h"
#include "link/udp_group.h"
#include "link/udp_group_priv.h"
#include "wire/gsi_route.h"

#ifndef SO_DETACH_REUSEPORT_BPF
#define SO_DETACH_REUSEPORT_BPF 68
#endif

#define NDEV 4
#define PER_MEMBER 8

static struct srn_dev_cfg cfg;
static struct srn_udp dev[NDEV];
static bool live[NDEV];           /* by member number */
static struct srn_rx_batch rx;

static int open_member(char *err, size_t errlen)
{
	struct srn_udp u;
	struct srn_dev_cfg c = cfg;
	int rc = srn_udp_open(&u, &c, err, errlen);
	if (rc)
		return rc;
	unsigned m = srn_udp_member(&u);
	CHECK(m < NDEV && !live[m], "member %u given twice", m);
	if (m >= NDEV) {
		srn_udp_close(&u);
		return -EINVAL;
	}
	dev[m] = u;
	live[m] = true;
	return (int)m;
}

/* A datagram that looks like a BTH to QP number qpn. */
static void send_to_qpn(int fd, uint32_t qpn, uint16_t tag)
{
	uint8_t p[64] = { 0x04 };
	p[5] = (uint8_t)(qpn >> 16);
	p[6] = (uint8_t)(qpn >> 8);
	p[7] = (uint8_t)qpn;
	p[11] = (uint8_t)tag;             /* the PSN's low byte: spread by the leave program */
	p[12] = (uint8_t)(tag >> 8);
	p[13] = (uint8_t)tag;
	sendto(fd, p, sizeof(p), 0, (const struct sockaddr *)&dev[0].local, dev[0].local_len);
}

static uint32_t qpn_of(const uint8_t *p)
{
	return (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7];
}

/* Each live member's socket must hold exactly its own packets: read them
 * raw (no forwarding) for at most 2 s. */
static void check_steering(const char *what, int tx)
{
	int want = 0, got = 0, wrong = 0;
	for (unsigned m = 0; m < NDEV; m++)
		if (live[m]) {
			for (int i = 0; i < PER_MEMBER; i++)
				send_to_qpn(tx, m << SRN_QPN_MEMBER_SHIFT | 0x2002, (uint16_t)i);
			want += PER_MEMBER;
		}
	uint64_t end = srn_now_ns() + 2000000000ull;
	while (got + wrong < want && srn_now_ns() < end) {
		for (unsigned m = 0; m < NDEV; m++) {
			if (!live[m])
				continue;
			uint8_t buf[256];
			ssize_t n;
			while ((n = recv(dev[m].fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
				if (srn_grp_is_probe(buf, (uint32_t)n))
					continue;       /* the group's own (udp_group_probe.c) */
				if (srn_qpn_member(qpn_of(buf)) == m)
					got++;
				else
					wrong++;
			}
		}
		usleep(1000);
	}
	CHECK(got == want && !wrong, "%s: %d of %d on their member's socket, %d elsewhere", what, got,
	      want, wrong);
	printf("%s: %d packets, each on its member's socket\n", what, got);
}

/* A CM MAD to QP1 for member m: a REP (the receiver's comm ID at MAD
 * data bytes 4..7) or a SIDR_REP (the request ID at bytes 0..3), each
 * with our member number in the ID's top byte (wire/gsi_route.h). */
static void send_mad_to(int fd, unsigned m, bool sidr)
{
	uint8_t p[SRN_GSI_MAD_OFF + 256 + 4] = { 0x64 };      /* UD SEND only */
	p[7] = SRN_GSI_QPN;
	p[SRN_GSI_CLASS_OFF] = SRN_GSI_CLASS_CM;
	p[SRN_GSI_ATTR_OFF + 1] = sidr ? SRN_GSI_ATTR_SIDR_REP : 0x13;
	p[sidr ? SRN_GSI_SIDR_ID_OFF : SRN_GSI_RCV_ID_OFF] = (uint8_t)m;
	p[SRN_GSI_DATA_OFF + 3] = 0x5a;                        /* the sender's own ID */
	sendto(fd, p, sizeof(p), 0, (const struct sockaddr *)&dev[0].local, dev[0].local_len);
}

/* QP1 belongs to no member: the program reads who a MAD is for. */
static void check_gsi_steering(int tx)
{
	int want = 0, got = 0, wrong = 0;
	for (unsigned m = 0; m < NDEV; m++)
		if (live[m]) {
			send_mad_to(tx, m, false);
			send_mad_to(tx, m, true);
			want += 2;
		}
	uint64_t end = srn_now_ns() + 2000000000ull;
	while (got + wrong < want && srn_now_ns() < end) {
		for (unsigned m = 0; m < NDEV; m++) {
			if (!live[m])
				continue;
			uint8_t buf[512];
			ssize_t n;
			while ((n = recv(dev[m].fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
				if (srn_grp_is_probe(buf, (uint32_t)n))
					continue;       /* the group's own (udp_group_probe.c) */
				struct srn_gsi_route r = srn_gsi_route(buf, (uint32_t)n);
				if (qpn_of(buf) == SRN_GSI_QPN && r.kind == SRN_GSI_ROUTE_MEMBER &&
				    r.member == m)
					got++;
				else
					wrong++;
			}
		}
		usleep(1000);
	}
	CHECK(got == want && !wrong, "QP1 MADs: %d of %d on their member's socket, %d elsewhere",
	      got, want, wrong);
	printf("QP1 MADs: %d, each on the socket of the member its comm ID names\n", got);
}

/* Steering off: every packet must still reach its member through
 * srn_udp_recv_batch (forwarded when the hash put it elsewhere). */
static struct srn_gro_batch gro;

/* One receive of member m, through GRO or plain recvmmsg. */
static int recv_any(unsigned m, bool use_gro, uint8_t **data, uint32_t *len, int max)
{
	int n;
	if (use_gro) {
		n = srn_udp_recv_gro(&dev[m], &gro);
		for (int i = 0; i < n && i < max; i++) {
			data[i] = gro.pkt[i].data;
			len[i] = gro.pkt[i].len;
		}
	} else {
		n = srn_udp_recv_batch(&dev[m], &rx, NULL);
		for (int i = 0; i < n && i < max; i++) {
			data[i] = rx.pkt[i].data;
			len[i] = rx.pkt[i].len;
		}
	}
	return n < max ? n : max;
}

static void check_forwarding(bool use_gro)
{
	int tx[8];
	int want = 0;
	for (int s = 0; s < 8; s++) {
		/* Several source ports: the hash spreads the flows. */
		tx[s] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		for (unsigned m = 0; m < NDEV; m++)
			for (int i = 0; i < 2; i++, want++)
				send_to_qpn(tx[s], m << SRN_QPN_MEMBER_SHIFT | 0x3003, (uint16_t)i);
	}
	int got = 0, wrong = 0;
	uint64_t end = srn_now_ns() + 3000000000ull;
	while (got + wrong < want && srn_now_ns() < end) {
		for (unsigned m = 0; m < NDEV; m++) {
			uint8_t *data[SRN_GRO_MAX_PKTS];
			uint32_t len[SRN_GRO_MAX_PKTS];
			int n = recv_any(m, use_gro, data, len, SRN_GRO_MAX_PKTS);
			for (int i = 0; i < n; i++) {
				if (len[i] == 0)
					continue;
				if (srn_qpn_member(qpn_of(data[i])) == m)
					got++;
				else
					wrong++;
			}
		}
		usleep(1000);
	}
	static uint64_t fwd_before, rcvd_before;
	uint64_t fwd = 0, fwd_rcvd = 0;
	for (unsigned m = 0; m < NDEV; m++) {
		fwd += srn_udp_group_stats(&dev[m])->forwarded;
		fwd_rcvd += srn_udp_group_stats(&dev[m])->fwd_rcvd;
	}
	fwd -= fwd_before;
	fwd_rcvd -= rcvd_before;
	fwd_before += fwd;
	rcvd_before += fwd_rcvd;
	CHECK(got == want && !wrong, "no steering: %d of %d delivered to their member, %d elsewhere",
	      got, want, wrong);
	CHECK(fwd > 0 && fwd == fwd_rcvd, "forwarded %llu, received forwarded %llu",
	      (unsigned long long)fwd, (unsigned long long)fwd_rcvd);
	printf("no steering%s: %d packets from 8 flows delivered, %llu of them forwarded\n",
	       use_gro ? ", GRO" : "", got, (unsigned long long)fwd);
	for (int s = 0; s < 8; s++)
		close(tx[s]);
}

/* A doorbell for member 3 wakes member 3: an empty packet on its side. */
/* A member that leaves sends one of those that stay a note to steer
 * again; until it is read the leaver's program is attached, under which
 * the moved member's packets go by hash.  Receive on every member (as
 * their progress would) until one has attached the group's program. */
static void wait_resteer(void)
{
	uint64_t before = 0, now = 0;
	for (unsigned m = 0; m < NDEV; m++)
		if (live[m])
			before += srn_udp_group_stats(&dev[m])->resteers;
	uint64_t end = srn_now_ns() + 2000000000ull;
	while (now <= before && srn_now_ns() < end) {
		now = 0;
		for (unsigned m = 0; m < NDEV; m++)
			if (live[m]) {
				srn_udp_recv_batch(&dev[m], &rx, NULL);
				now += srn_udp_group_stats(&dev[m])->resteers;
			}
		usleep(1000);
	}
	CHECK(now > before, "no member steered again after a leave");
}

/* The program a leaver attaches before its close: nothing reaches its
 * index, with steering for the rest or spread over them. */
static void check_leave_prog(const uint8_t *order, unsigned n, unsigned self, bool steer, int tx)
{
	struct sock_filter prog[SRN_GRP_PROG_MAX];
	int len = srn_udp_group_prog_leave(order, n, self, steer, prog);
	struct sock_fprog fp = { .len = (unsigned short)len, .filter = prog };
	CHECK(len > 0 && setsockopt(dev[0].fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &fp,
				    sizeof(fp)) == 0, "attach the leave program: %s", strerror(errno));
	int want = 0, got = 0, self_got = 0, wrong = 0;
	for (unsigned m = 0; m < NDEV; m++) {
		for (int i = 0; i < PER_MEMBER; i++)
			send_to_qpn(tx, m << SRN_QPN_MEMBER_SHIFT | 0x2002, (uint16_t)i);
		want += PER_MEMBER;
	}
	uint64_t end = srn_now_ns() + 2000000000ull;
	while (got < want && srn_now_ns() < end) {
		for (unsigned m = 0; m < NDEV; m++) {
			uint8_t buf[256];
			ssize_t r;
			while ((r = recv(dev[m].fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
				if (srn_grp_is_probe(buf, (uint32_t)r))
					continue;       /* the group's own (udp_group_probe.c) */
				got++;
				unsigned to = srn_qpn_member(qpn_of(buf));
				if (m == order[self])
					self_got++;
				else if (steer && to != order[self] && to != m)
					wrong++;
			}
		}
		usleep(1000);
	}
	CHECK(got == want && !self_got && !wrong,
	      "leave program (steer %d): %d of %d, %d on the leaver's socket, %d misplaced", steer,
	      got, want, self_got, wrong);
	printf("leave program (steer %d): %d packets, none to index %u\n", steer, got, self);
	/* Back to the group's own program. */
	len = srn_udp_group_prog(order, n, prog);
	fp.len = (unsigned short)len;
	CHECK(setsockopt(dev[0].fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &fp, sizeof(fp)) == 0);
}

static void check_doorbell(void)
{
	CHECK(srn_udp_doorbell(&dev[0], (const struct sockaddr *)&dev[3].local, dev[3].local_len, 3) == 0);
	struct pollfd pf = { .fd = srn_udp_group_fd(&dev[3]), .events = POLLIN };
	CHECK(pf.fd >= 0 && poll(&pf, 1, 2000) == 1, "member 3's forwarding socket not readable");
	int n = srn_udp_recv_batch(&dev[3], &rx, NULL);
	CHECK(n == 1 && rx.pkt[0].len == 0, "doorbell: %d packets", n);
}

int main(void)
{
	char err[256];
	srand((unsigned)(srn_now_ns() ^ (uint64_t)getpid()));
	if (srn_rx_batch_init(&rx))
		return 1;
	int rc = -EADDRINUSE;
	for (int t = 0; t < 5 && rc == -EADDRINUSE; t++) {
		memset(&cfg, 0, sizeof(cfg));
		snprintf(cfg.name, sizeof(cfg.name), "grp");
		struct sockaddr_in *sin = (struct sockaddr_in *)&cfg.addr;
		cfg.family = sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)(rand() % 0xfffffe + 1));
		cfg.port = (uint16_t)(20000 + rand() % 11000);
		rc = open_member(err, sizeof(err));
	}
	CHECK(rc == 0, "first member: %d %s", rc, err);
	for (int i = 1; i < NDEV && !srn_check_failures; i++) {
		rc = open_member(err, sizeof(err));
		CHECK(rc == i, "member %d: got %d %s", i, rc, err);
	}
	if (srn_check_failures)
		return srn_check_result();
	int tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	check_steering("4 members", tx);

	/* Member 1 leaves: the kernel moves member 3's socket to index 1. */
	srn_udp_close(&dev[1]);
	live[1] = false;
	wait_resteer();
	check_steering("member 1 gone", tx);
	/* A newcomer takes the free member number 1, at the group's end. */
	rc = open_member(err, sizeof(err));
	CHECK(rc == 1, "newcomer: %d %s", rc, err);
	check_steering("member 1 again", tx);
	check_gsi_steering(tx);

	/* The kernel's order is now members 0, 3, 2, 1. */
	const uint8_t order[NDEV] = { 0, 3, 2, 1 };
	check_leave_prog(order, NDEV, 2, true, tx);
	check_leave_prog(order, NDEV, 0, false, tx);
	check_leave_prog(order, NDEV, 3, true, tx);

	check_doorbell();

	/* Detach the program: the kernel hashes flows over the sockets, and
	 * each flow carries packets for all four members. */
	int zero = 0;
	for (unsigned m = 0; m < NDEV; m++)
		srn_udp_group_set_steer(&dev[m], false);   /* or their resteer attaches it again */
	CHECK(setsockopt(dev[0].fd, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, &zero, sizeof(zero)) == 0,
	      "detach: %s", strerror(errno));
	check_forwarding(false);
	/* The same through UDP GRO, as the engine receives. */
	CHECK(srn_gro_batch_init(&gro) == 0);
	for (unsigned m = 0; m < NDEV; m++)
		CHECK(srn_udp_enable_gro(&dev[m]));
	check_forwarding(true);
	srn_gro_batch_free(&gro);

	close(tx);
	for (unsigned m = 0; m < NDEV; m++)
		if (live[m])
			srn_udp_close(&dev[m]);
	srn_rx_batch_free(&rx);
	return srn_check_result();
}
