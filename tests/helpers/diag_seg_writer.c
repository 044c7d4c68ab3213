/* diag_seg_writer - a stand-in for a softrnic process, for
 * test_diag_tools.sh: writes a diagnostic segment through the diag API
 * alone (no device, no socket), with known contents:
 *
 *   device "fakedev" at 127.0.0.9; counters sent_pkts 100, rcvd_pkts 40,
 *   bad_icrc 3; PD (slot 0), MRs of 4096, 65536 and 1048576 bytes with
 *   rkeys 0x101, 0x202, 0x303 (slots 1-3), a CQ (cqe 16, fill 2), an RC QP
 *   0x00a001 in RTS to QP 0x00b002 at 127.0.0.2 with per-QP counters, and
 *   one explained REM_ACCESS_ERR plus a QP log of 20 lines ("event 0".."event 19").
 *
 * Usage: diag_seg_writer MODE
 *   run     print "ready <pid>", then add 10 to sent_pkts every 10 ms
 *           until killed (at most 120 s)
 *   close   close the segment cleanly and exit
 *   exit    exit without closing (the library marks it "exited")
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/cq.h"
#include "core/mr.h"
#include "core/qp.h"
#include "core/snap.h"
#include "diag/shm.h"
#include "transport/explain.h"

static struct srn_pd pd;
static struct srn_mr mrs[3];
static struct srn_cq cq;
static struct srn_qp qp;
static struct srn_swqe sq[4];

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "run";
	const uint8_t gid[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 9 };
	char err[256];
	struct srn_diag *d = srn_diag_create("fakedev", gid, err, sizeof(err));
	if (!d || !srn_diag_is_shared(d)) {
		fprintf(stderr, "diag_seg_writer: no shared segment: %s\n", err);
		return 1;
	}
	struct srn_counters *c = srn_diag_counters(d);
	srn_count(c, SRN_CNT_SENT_PKTS, 100);
	srn_count(c, SRN_CNT_RCVD_PKTS, 40);
	srn_count(c, SRN_CNT_BAD_ICRC, 3);

	atomic_store(&pd.refs, 5);
	struct srn_diag_obj *opd = srn_diag_obj_add(d, SRN_DIAG_PD, &pd);
	srn_diag_snap(opd);
	static const uint64_t lens[3] = { 4096, 65536, 1048576 };
	for (int i = 0; i < 3; i++) {
		mrs[i] = (struct srn_mr){ .pd = &pd, .iova = 0x7f0000000000ull + (uint64_t)i * 0x200000,
					  .length = lens[i],
					  .access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE };
		mrs[i].ibmr.lkey = mrs[i].ibmr.rkey = 0x101u * (uint32_t)(i + 1);
		srn_diag_snap(srn_diag_obj_add(d, SRN_DIAG_MR, &mrs[i]));
	}
	cq.ibcq.cqe = 16;
	cq.size = 16;
	cq.head = 7;
	cq.tail = 5;
	cq.nqps = 1;
	srn_diag_snap(srn_diag_obj_add(d, SRN_DIAG_CQ, &cq));

	qp.pd = &pd;
	qp.scq = qp.rcq = &cq;
	qp.type = IBV_QPT_RC;
	qp.qpn = 0x00a001;
	qp.state = IBV_QPS_RTS;
	qp.attr.dest_qp_num = 0x00b002;
	qp.attr.retry_cnt = 7;
	qp.attr.rnr_retry = 7;
	qp.attr.timeout = 14;
	qp.comp.retry_left = 7;
	qp.comp.rnr_left = 7;
	uint8_t *dg = qp.attr.ah_attr.grh.dgid.raw;
	dg[10] = dg[11] = 0xff;
	dg[12] = 127;
	dg[15] = 2;
	struct sockaddr_in *sin = (struct sockaddr_in *)&qp.path.peer;
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, "127.0.0.2", &sin->sin_addr);
	qp.path.peer_len = sizeof(*sin);
	qp.sq.wqe = sq;
	qp.sq.size = 4;
	qp.sq.head = 1;
	qp.req.cur = 1;
	qp.req.psn = 0x000101;
	qp.comp.una = 0x000100;
	qp.path.mtu = 4096;
	sq[0] = (struct srn_swqe){ .wr_id = 0x2a, .opcode = IBV_WR_RDMA_WRITE, .length = 4096,
				   .rkey = 0x1234, .remote_addr = 0x7f00deadb000ull,
				   .first_psn = 0x000100, .last_psn = 0x000100 };
	struct srn_diag_obj *oqp = srn_diag_obj_add(d, SRN_DIAG_QP, &qp);
	srn_diag_snap(oqp);
	srn_diag_qp_count(oqp, SRN_QPC_SENT_PKTS, 77);
	srn_diag_qp_count(oqp, SRN_QPC_RETRANSMITS, 2);
	for (int i = 0; i < 20; i++)
		srn_diag_log(oqp, SRN_LOG_INFO, "event %d", i);
	srn_diag_qp_peer_said(oqp, 0x62, 0x000100, 0);
	srn_diag_explain_send(oqp, &qp, &sq[0], IBV_WC_REM_ACCESS_ERR,
			      "the responder NAKed remote access error");

	if (!strcmp(mode, "close")) {
		srn_diag_close(d);
		return 0;
	}
	if (!strcmp(mode, "exit"))
		return 0;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	for (int i = 0; i < 12000; i++) {
		srn_count(c, SRN_CNT_SENT_PKTS, 10);
		nanosleep(&ts, NULL);
	}
	return 0;
}
