/*
 * test_shared_many.c - many processes behind one device address, some of
 * them killed, the first among them (link/udp_group.h, wire/gsi_route.h).
 *
 *   test_shared_many [N]     N processes (even, 4..256; default 64)
 *
 * N processes share one loopback address (SOFTRNIC_DEVICES, a random
 * 127.88.x.y of this run, so other tests' processes stay apart) and form
 * N/2 pairs, each an rdma_cm server and client on its own port.  The
 * first process opens its device before any other, so it is member 0.
 * The first half of the pairs connect and stream; meanwhile a third of
 * all processes, the first one included, are SIGKILLed at random; then
 * the second half of the pairs connect (their REQs now reach a group
 * without its first member).  Every pair whose two processes survive
 * must finish ROUNDS round trips of 4 KiB messages, each checked byte by
 * byte on both sides: no connection, message or CM request may be lost.
 * Pairs that lost a process are killed at the end, unjudged.
 *
 * Every wait is bounded; the seed is printed so a failure can be re-run
 * (SRN_SEED).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "check.h"

#define MAX_PROCS 256
#define MSG 4096
#define ROUNDS 200
#define READY_S 120          /* all processes have opened their device */
#define FINISH_S 240         /* surviving pairs are done */

static char addr[32];
static unsigned base_port;

enum { EXIT_OK = 0, EXIT_SETUP = 3, EXIT_DATA = 4 };

/* A step of a pair's setup failed: say which, and why, then exit 3. */
static int setup_failed(unsigned pair, const char *role, const char *step)
{
	fprintf(stderr, "pair %u %s: %s failed: %s\n", pair, role, step, strerror(errno));
	return EXIT_SETUP;
}

static void fill(uint8_t *b, unsigned pair, unsigned round, uint8_t flip)
{
	uint32_t x = (pair + 1) * 2654435761u ^ (round + 1) * 40503u;
	for (unsigned i = 0; i < MSG; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		b[i] = (uint8_t)x ^ flip;
	}
	memcpy(b, &round, sizeof(round));   /* which round, for the log */
	b[4] ^= flip;
}

static bool same(const uint8_t *got, unsigned pair, unsigned round, uint8_t flip)
{
	uint8_t want[MSG];
	fill(want, pair, round, flip);
	return memcmp(got, want, MSG) == 0;
}

/* A child tells its parent it is ready; the parent tells a client to go
 * (a write to a child that died fails, unjudged: SIGPIPE is ignored). */
static bool tell(int fd, char c)
{
	return write(fd, &c, 1) == 1;
}

static char hear(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c = 0;
	if (poll(&p, 1, timeout_ms) != 1 || read(fd, &c, 1) != 1)
		return 0;
	return c;
}

static struct rdma_addrinfo *resolve(unsigned pair, bool passive)
{
	char port[16];
	snprintf(port, sizeof(port), "%u", base_port + pair);
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP };
	if (passive)
		hints.ai_flags = RAI_PASSIVE;
	struct rdma_addrinfo *res = NULL;
	return rdma_getaddrinfo(addr, port, &hints, &res) ? NULL : res;
}

static void qp_attr(struct ibv_qp_init_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->cap.max_send_wr = a->cap.max_recv_wr = 4;
	a->cap.max_send_sge = a->cap.max_recv_sge = 1;
	a->qp_type = IBV_QPT_RC;
	a->sq_sig_all = 1;
}

/* The server of pair `pair`: listen, tell the parent, take the request,
 * echo ROUNDS messages back flipped. */
static int server(unsigned pair, int up)
{
	struct rdma_addrinfo *res = resolve(pair, true);
	struct rdma_cm_id *listen_id, *id;
	struct ibv_qp_init_attr a;
	qp_attr(&a);
	if (!res)
		return setup_failed(pair, "server", "rdma_getaddrinfo");
	if (rdma_create_ep(&listen_id, res, NULL, &a))
		return setup_failed(pair, "server", "rdma_create_ep");
	if (rdma_listen(listen_id, 1))
		return setup_failed(pair, "server", "rdma_listen");
	if (!tell(up, 'R'))
		return EXIT_SETUP;
	if (rdma_get_request(listen_id, &id))
		return EXIT_SETUP;
	static uint8_t rx[MSG], tx[MSG];
	struct ibv_mr *rmr = rdma_reg_msgs(id, rx, MSG), *smr = rdma_reg_msgs(id, tx, MSG);
	if (!rmr || !smr || rdma_post_recv(id, NULL, rx, MSG, rmr) || rdma_accept(id, NULL))
		return EXIT_SETUP;
	struct ibv_wc wc;
	for (unsigned r = 0; r < ROUNDS; r++) {
		if (rdma_get_recv_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
			return EXIT_SETUP;
		if (wc.byte_len != MSG || !same(rx, pair, r, 0)) {
			fprintf(stderr, "pair %u server: round %u: wrong data\n", pair, r);
			return EXIT_DATA;
		}
		if (r + 1 < ROUNDS && rdma_post_recv(id, NULL, rx, MSG, rmr))
			return EXIT_SETUP;
		fill(tx, pair, r, 0x5a);
		if (rdma_post_send(id, NULL, tx, MSG, smr, 0) || rdma_get_send_comp(id, &wc) <= 0 ||
		    wc.status != IBV_WC_SUCCESS)
			return EXIT_SETUP;
	}
	rdma_disconnect(id);
	return EXIT_OK;
}

/* The client: resolve (which opens the device: it joins the group), tell
 * the parent, wait for its go, connect, send ROUNDS messages and check
 * each echo. */
static int client(unsigned pair, int up, int down)
{
	struct rdma_addrinfo *res = resolve(pair, false);
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr a;
	qp_attr(&a);
	if (!res)
		return setup_failed(pair, "client", "rdma_getaddrinfo");
	if (rdma_create_ep(&id, res, NULL, &a))
		return setup_failed(pair, "client", "rdma_create_ep");
	if (!tell(up, 'R'))
		return EXIT_SETUP;
	if (hear(down, FINISH_S * 1000) != 'G')
		return EXIT_SETUP;
	static uint8_t rx[MSG], tx[MSG];
	struct ibv_mr *rmr = rdma_reg_msgs(id, rx, MSG), *smr = rdma_reg_msgs(id, tx, MSG);
	if (!rmr || !smr || rdma_post_recv(id, NULL, rx, MSG, rmr))
		return EXIT_SETUP;
	/* The server may not listen yet when the parent says go for the
	 * second half: a REJ (no listener) is retried, boundedly. */
	int tries = 0;
	while (rdma_connect(id, NULL)) {
		if (++tries > 50)
			return EXIT_SETUP;
		usleep(100000);
		rdma_destroy_ep(id);
		if (rdma_create_ep(&id, res, NULL, &a))
			return EXIT_SETUP;
		rmr = rdma_reg_msgs(id, rx, MSG);
		smr = rdma_reg_msgs(id, tx, MSG);
		if (!rmr || !smr || rdma_post_recv(id, NULL, rx, MSG, rmr))
			return EXIT_SETUP;
	}
	struct ibv_wc wc;
	for (unsigned r = 0; r < ROUNDS; r++) {
		fill(tx, pair, r, 0);
		if (rdma_post_send(id, NULL, tx, MSG, smr, 0) || rdma_get_send_comp(id, &wc) <= 0 ||
		    wc.status != IBV_WC_SUCCESS)
			return EXIT_SETUP;
		if (rdma_get_recv_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
			return EXIT_SETUP;
		if (wc.byte_len != MSG || !same(rx, pair, r, 0x5a)) {
			fprintf(stderr, "pair %u client: round %u: wrong echo\n", pair, r);
			return EXIT_DATA;
		}
		if (r + 1 < ROUNDS && rdma_post_recv(id, NULL, rx, MSG, rmr))
			return EXIT_SETUP;
	}
	rdma_disconnect(id);
	return EXIT_OK;
}

struct proc {
	pid_t pid;
	int up, down;           /* parent's ends: reads 'R', writes 'G' */
	bool killed, done;
	int status;
};

static struct proc procs[MAX_PROCS];

static void start(unsigned i)
{
	int up[2], down[2];
	CHECK(pipe(up) == 0 && pipe(down) == 0, "pipe: %s", strerror(errno));
	pid_t pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		alarm(READY_S + FINISH_S + 30);   /* never outlive a lost parent */
		unsigned pair = i / 2;
		_exit(i % 2 == 0 ? server(pair, up[1]) : client(pair, up[1], down[0]));
	}
	close(up[1]);
	close(down[0]);
	procs[i] = (struct proc){ .pid = pid, .up = up[0], .down = down[1] };
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Reap whoever is done, for at most wait_ms. */
static void reap(unsigned n, int wait_ms)
{
	uint64_t end = now_ms() + (uint64_t)wait_ms;
	for (;;) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);
		if (pid > 0) {
			for (unsigned i = 0; i < n; i++)
				if (procs[i].pid == pid) {
					procs[i].done = true;
					procs[i].status = st;
				}
			continue;
		}
		if (now_ms() >= end)
			return;
		usleep(10000);
	}
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 64;
	if (n < 4 || n > MAX_PROCS || n % 2) {
		fprintf(stderr, "usage: %s [N: even, 4..%d]\n", argv[0], MAX_PROCS);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	const char *s = getenv("SRN_SEED");
	unsigned seed = s ? (unsigned)strtoul(s, NULL, 0) : (unsigned)(time(NULL) ^ getpid());
	srandom(seed);
	snprintf(addr, sizeof(addr), "127.88.%u.%u", (unsigned)(random() % 250) + 1,
		 (unsigned)(random() % 250) + 1);
	/* Below the ephemeral range (32768 on), where the clients' own ports
	 * come from: a server's port must not be one of them. */
	base_port = 20000 + (unsigned)(random() % (32768 - 20000 - MAX_PROCS / 2));
	char devs[96];
	snprintf(devs, sizeof(devs), "name=softrnic0,addr=%s", addr);
	setenv("SOFTRNIC_DEVICES", devs, 1);
	printf("seed %u: %u processes behind %s, ports %u..%u\n", seed, n, addr, base_port,
	       base_port + n / 2 - 1);
	fflush(stdout);

	/* The first process opens its device alone: it is member 0. */
	uint64_t t0 = now_ms();
	start(0);
	CHECK(hear(procs[0].up, READY_S * 1000) == 'R', "process 0 never opened its device");
	for (unsigned i = 1; i < n; i++)
		start(i);
	for (unsigned i = 1; i < n && !srn_check_failures; i++) {
		int left = (int)(READY_S * 1000 - (now_ms() - t0));
		CHECK(hear(procs[i].up, left > 0 ? left : 0) == 'R', "process %u never ready", i);
	}
	if (srn_check_failures) {
		for (unsigned i = 0; i < n; i++)
			kill(procs[i].pid, SIGKILL);
		reap(n, 5000);
		return 1;
	}
	printf("all %u processes joined in %llu ms\n", n, (unsigned long long)(now_ms() - t0));

	unsigned pairs = n / 2, half = pairs / 2;
	for (unsigned p = 0; p < half; p++)
		tell(procs[2 * p + 1].down, 'G');
	/* While the first half streams: kill a third, process 0 first. */
	usleep(20000 + (useconds_t)(random() % 100000));
	unsigned to_kill = n / 3, killed = 0;
	procs[0].killed = true;
	for (killed = 1; killed < to_kill;) {
		unsigned i = (unsigned)(random() % n);
		if (!procs[i].killed) {
			procs[i].killed = true;
			killed++;
		}
	}
	for (unsigned i = 0; i < n; i++)
		if (procs[i].killed)
			kill(procs[i].pid, SIGKILL);
	printf("killed %u of %u processes, the first included\n", killed, n);
	/* The second half connects to a group that lost them. */
	for (unsigned p = half; p < pairs; p++)
		if (!procs[2 * p].killed && !procs[2 * p + 1].killed)
			tell(procs[2 * p + 1].down, 'G');

	/* Every pair of two survivors must finish. */
	uint64_t end = now_ms() + FINISH_S * 1000;
	for (;;) {
		reap(n, 200);
		bool all = true;
		for (unsigned p = 0; p < pairs; p++)
			if (!procs[2 * p].killed && !procs[2 * p + 1].killed)
				all &= procs[2 * p].done && procs[2 * p + 1].done;
		if (all || now_ms() >= end)
			break;
	}
	unsigned ok = 0, judged = 0;
	for (unsigned p = 0; p < pairs; p++) {
		struct proc *sv = &procs[2 * p], *cl = &procs[2 * p + 1];
		if (sv->killed || cl->killed)
			continue;
		judged++;
		bool good = true;
		for (int k = 0; k < 2; k++) {
			struct proc *x = k ? cl : sv;
			const char *role = k ? "client" : "server";
			if (!x->done) {
				good = false;
				CHECK(false, "pair %u %s: not done after %d s", p, role, FINISH_S);
			} else if (!WIFEXITED(x->status) || WEXITSTATUS(x->status) != EXIT_OK) {
				good = false;
				CHECK(false, "pair %u (%s): %s exit %d", p,
				      p < half ? "before the kills" : "after the kills", role,
				      WIFEXITED(x->status) ? WEXITSTATUS(x->status) : -WTERMSIG(x->status));
			}
		}
		ok += good;
	}
	for (unsigned i = 0; i < n; i++)
		if (!procs[i].done)
			kill(procs[i].pid, SIGKILL);
	reap(n, 5000);
	printf("%u of %u surviving pairs finished %u verified round trips of %d bytes "
	       "(%u pairs lost a process)\n", ok, judged, ROUNDS, MSG, pairs - judged);
	return srn_check_failures ? 1 : 0;
}
