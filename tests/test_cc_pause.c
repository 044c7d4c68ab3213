/*
 * test_cc_pause.c - a softrnic sender honours the emulated switch's pause
 * (src/link/pause.h, written by tools/switch_pause.c as `softrnic switch
 * --pause-dir` does).
 *
 * Two processes over the UDP link (SOFTRNIC_SHM=0: the pause stands for
 * the Ethernet link; same-host rings never cross a switch).  The sender,
 * which also plays the switch and writes the record, runs with
 * SOFTRNIC_PAUSE_FILE; the receiver does not.
 *  1. Paused, then 16 Sends posted: for 400 ms not one packet leaves
 *     (sent_pkts unchanged, no completion on either side); after the
 *     resume all arrive, none before the resume; rx_pause counts 1 and
 *     rx_pause_duration at least the 400 ms.
 *  2. A pause whose writer dies (never resumed, lease 300 ms): the Sends
 *     leave once the lease ran out, not before.
 *  3. Files that must not pause us are refused: group-writable, a
 *     symlink, the wrong magic.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/device.h"
#include "core/nic.h"
#include "diag/clock.h"
#include "link/pause.h"
#include "rc_test_conn.h"
#include "switch_pause.h"

#define NWR 16
#define SLOT 64
#define PAUSE_MS 400
#define LEASE_MS 300

struct info {
	union ibv_gid gid;
	uint32_t qpn;
};

static uint64_t cnt(struct srn_nic *nic, enum srn_counter c)
{
	return atomic_load(&nic->diag.cnt->v[c]);
}

static void post_recvs(struct ibv_qp *qp, struct ibv_mr *mr, uint8_t *buf)
{
	for (int i = 0; i < NWR; i++) {
		struct ibv_sge s = { (uintptr_t)buf + (size_t)i * SLOT, SLOT, mr->lkey };
		struct ibv_recv_wr w = { .wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1 }, *bad;
		CHECK(ibv_post_recv(qp, &w, &bad) == 0);
	}
}

static void post_sends(struct ibv_qp *qp, struct ibv_mr *mr, uint8_t *buf)
{
	for (int i = 0; i < NWR; i++) {
		struct ibv_sge s = { (uintptr_t)buf + (size_t)i * SLOT, SLOT, mr->lkey };
		struct ibv_send_wr w = { .wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1,
					 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
		CHECK(ibv_post_send(qp, &w, &bad) == 0);
	}
}

/* Completions seen by polling for ms milliseconds. */
static int poll_for(struct ibv_cq *cq, int ms)
{
	uint64_t end = srn_now_ns() + (uint64_t)ms * 1000000ull;
	struct ibv_wc wc;
	int n = 0;

	while (srn_now_ns() < end) {
		int r = ibv_poll_cq(cq, 1, &wc);
		CHECK(r >= 0);
		n += r;
		if (!r)
			usleep(1000);
	}
	return n;
}

/* Receiver: one round of NWR messages; reports when the first came. */
static void receive_round(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, uint8_t *buf,
			  int fd, uint32_t tag)
{
	post_recvs(qp, mr, buf);
	srn_tc_barrier(fd, tag, 10000);
	uint64_t first = 0;
	for (int i = 0; i < NWR; i++) {
		struct ibv_wc wc = srn_tc_poll_one(cq, 20);
		CHECK(wc.status == IBV_WC_SUCCESS);
		if (!first)
			first = srn_now_ns();
	}
	srn_tc_send(fd, &first, sizeof(first));
}

static void refusals(const char *dir)
{
	char path[600], link[600], err[256];
	struct srn_swp p;

	/* Group-writable: anyone in the group could pause us. */
	CHECK(srn_swp_open(&p, dir, "gw") == 0);
	snprintf(path, sizeof(path), "%s/gw.pause", dir);
	CHECK(chmod(path, 0620) == 0);
	CHECK(srn_pause_map(path, err, sizeof(err)) == NULL);
	printf("refused, group-writable: %s\n", err);
	/* A symlink to a good record: the name given is the file used. */
	CHECK(chmod(path, 0600) == 0);
	CHECK(srn_pause_map(path, err, sizeof(err)) != NULL);
	snprintf(link, sizeof(link), "%s/link.pause", dir);
	CHECK(symlink(path, link) == 0);
	CHECK(srn_pause_map(link, err, sizeof(err)) == NULL);
	printf("refused, symlink: %s\n", err);
	/* Not our record. */
	p.rec->magic = 0;
	CHECK(srn_pause_map(path, err, sizeof(err)) == NULL);
	printf("refused, magic: %s\n", err);
	srn_swp_close(&p);
	unlink(link);
}

int main(void)
{
	char dir[] = "/tmp/srn-pause-XXXXXX", path[600];
	struct srn_swp sw;
	int fd;

	setenv("SOFTRNIC_SHM", "0", 1);
	CHECK(mkdtemp(dir) != NULL);
	CHECK(srn_swp_open(&sw, dir, "p0") == 0);
	snprintf(path, sizeof(path), "%s/p0.pause", dir);
	pid_t pid = srn_tc_fork(&fd);
	srn_tc_role = pid ? "sender" : "receiver";
	if (pid)
		setenv(SRN_PAUSE_ENV, path, 1);     /* the sender's link only */
	union ibv_gid gid;
	struct ibv_context *ctx = srn_tc_open(&gid);
	struct srn_nic *nic = srn_ctx(ctx)->nic;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 2 * NWR, NULL, NULL, 0);
	static uint8_t buf[NWR * SLOT];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = NWR, .max_recv_wr = NWR, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(pd && cq && mr && qp);
	struct info me = { gid, qp->qp_num }, peer;
	srn_tc_xchg(fd, &me, &peer, sizeof(me), 5000);
	struct srn_tc_qp_opts o = srn_tc_default_opts();
	srn_tc_connect(qp, &peer.gid, peer.qpn, 1, 1, &o);
	if (!pid) {
		receive_round(qp, cq, mr, buf, fd, 1);
		receive_round(qp, cq, mr, buf, fd, 2);
		srn_tc_barrier(fd, 3, 10000);
		return 0;
	}

	/* 1. Paused while the Sends are posted. */
	srn_swp_pause(&sw, srn_now_ns(), 5000000000ull);
	srn_tc_barrier(fd, 1, 10000);
	uint64_t sent0 = cnt(nic, SRN_CNT_SENT_PKTS);
	post_sends(qp, mr, buf);
	int early = poll_for(cq, PAUSE_MS);
	uint64_t sent_paused = cnt(nic, SRN_CNT_SENT_PKTS) - sent0;
	uint64_t resumed = srn_now_ns();
	srn_swp_resume(&sw, resumed);
	printf("paused %d ms: %llu packets sent, %d completions\n", PAUSE_MS,
	       (unsigned long long)sent_paused, early);
	CHECK(sent_paused == 0);
	CHECK(early == 0);
	for (int i = 0; i < NWR; i++)
		CHECK(srn_tc_poll_one(cq, 20).status == IBV_WC_SUCCESS);
	uint64_t first;
	srn_tc_recv(fd, &first, sizeof(first), 20000);
	CHECK(first >= resumed);
	printf("rx_pause=%llu rx_pause_duration=%llu us\n",
	       (unsigned long long)cnt(nic, SRN_CNT_RX_PAUSE),
	       (unsigned long long)cnt(nic, SRN_CNT_RX_PAUSE_DURATION));
	CHECK(cnt(nic, SRN_CNT_RX_PAUSE) == 1);
	CHECK(cnt(nic, SRN_CNT_RX_PAUSE_DURATION) >= PAUSE_MS * 1000ull);

	/* 2. The writer goes away mid-pause: the lease ends it. */
	uint64_t t0 = srn_now_ns();
	srn_swp_pause(&sw, t0, LEASE_MS * 1000000ull);
	srn_tc_barrier(fd, 2, 10000);
	post_sends(qp, mr, buf);
	for (int i = 0; i < NWR; i++)
		CHECK(srn_tc_poll_one(cq, 20).status == IBV_WC_SUCCESS);
	srn_tc_recv(fd, &first, sizeof(first), 20000);
	printf("lease of %d ms: first message %.1f ms after the pause began\n", LEASE_MS,
	       (double)(first - t0) / 1e6);
	CHECK(first >= t0 + LEASE_MS * 1000000ull);
	CHECK(cnt(nic, SRN_CNT_RX_PAUSE) == 2);
	srn_tc_barrier(fd, 3, 10000);

	/* 3. What must not pause us. */
	refusals(dir);
	srn_swp_close(&sw);
	rmdir(dir);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return srn_tc_wait_child(pid, 10);
}
