/*
 * test_qp_rules.c - the QP modify rules (core/qp_rules.c) against an
 * independent transcription of docs/wire.md §8 (plus the kernel's
 * XRC columns), and the attribute value bounds at each edge.
 *
 * The expected table below is text, parsed at run time, on purpose: it is
 * written from the document, not from qp_rules.c, so a slip in either
 * shows up as a mismatch.  A naive checker built on it is compared with
 * srn_qp_check_transition on every legal mask subset, on every single
 * stray bit, and on random masks.
 */
#include "core/qp_rules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static const enum ibv_qp_type types[] = {
	IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_XRC_SEND, IBV_QPT_XRC_RECV,
};
#define NTYPES 5
static const char *const type_tags[NTYPES] = { "RC", "UC", "UD", "XS", "XR" };
static const char *const st_tags[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

/*
 * "types cur next | required | optional"; types is a comma list or "*".
 * Pairs not listed are illegal for that type.
 */
static const char *const expect_rows[] = {
	"* RESET RESET | - | -",
	"UD RESET INIT | PKEY_INDEX PORT QKEY | -",
	"RC,UC,XS,XR RESET INIT | PKEY_INDEX PORT ACCESS_FLAGS | -",
	"UD INIT INIT | - | PKEY_INDEX PORT QKEY",
	"RC,UC,XS,XR INIT INIT | - | PKEY_INDEX PORT ACCESS_FLAGS",
	"UD INIT RTR | - | PKEY_INDEX QKEY",
	"UC,XS INIT RTR | AV PATH_MTU DEST_QPN RQ_PSN | ALT_PATH ACCESS_FLAGS PKEY_INDEX",
	"RC,XR INIT RTR | AV PATH_MTU DEST_QPN RQ_PSN MAX_DEST_RD_ATOMIC MIN_RNR_TIMER"
	" | ALT_PATH ACCESS_FLAGS PKEY_INDEX",
	/* RATE_LIMIT: softrnic's pacer (verbs/verbs_rate.c), where the kernel
	 * allows it for raw packet QPs. */
	"UD RTR RTS | SQ_PSN | CUR_STATE QKEY RATE_LIMIT",
	"UC RTR RTS | SQ_PSN | CUR_STATE ALT_PATH ACCESS_FLAGS PATH_MIG_STATE RATE_LIMIT",
	"RC RTR RTS | SQ_PSN TIMEOUT RETRY_CNT RNR_RETRY MAX_QP_RD_ATOMIC"
	" | CUR_STATE ALT_PATH ACCESS_FLAGS MIN_RNR_TIMER PATH_MIG_STATE RATE_LIMIT",
	"XS RTR RTS | SQ_PSN TIMEOUT RETRY_CNT RNR_RETRY MAX_QP_RD_ATOMIC"
	" | CUR_STATE ALT_PATH ACCESS_FLAGS PATH_MIG_STATE",
	"XR RTR RTS | SQ_PSN TIMEOUT | CUR_STATE ALT_PATH ACCESS_FLAGS MIN_RNR_TIMER PATH_MIG_STATE",
	"UD RTS,SQD RTS | - | CUR_STATE QKEY RATE_LIMIT",
	"UC RTS,SQD RTS | - | CUR_STATE ACCESS_FLAGS ALT_PATH PATH_MIG_STATE RATE_LIMIT",
	"XS RTS,SQD RTS | - | CUR_STATE ACCESS_FLAGS ALT_PATH PATH_MIG_STATE",
	"RC RTS,SQD RTS | - | CUR_STATE ACCESS_FLAGS ALT_PATH PATH_MIG_STATE MIN_RNR_TIMER RATE_LIMIT",
	"XR RTS,SQD RTS | - | CUR_STATE ACCESS_FLAGS ALT_PATH PATH_MIG_STATE MIN_RNR_TIMER",
	"* RTS SQD | - | EN_SQD_ASYNC_NOTIFY",
	"UD SQD SQD | - | PKEY_INDEX QKEY",
	"UC SQD SQD | - | AV ALT_PATH ACCESS_FLAGS PKEY_INDEX PATH_MIG_STATE",
	"RC SQD SQD | - | PORT AV TIMEOUT RETRY_CNT RNR_RETRY MAX_QP_RD_ATOMIC MAX_DEST_RD_ATOMIC"
	" ALT_PATH ACCESS_FLAGS PKEY_INDEX MIN_RNR_TIMER PATH_MIG_STATE",
	"XS SQD SQD | - | PORT AV TIMEOUT RETRY_CNT RNR_RETRY MAX_QP_RD_ATOMIC"
	" ALT_PATH ACCESS_FLAGS PKEY_INDEX PATH_MIG_STATE",
	"XR SQD SQD | - | PORT AV TIMEOUT MAX_DEST_RD_ATOMIC ALT_PATH ACCESS_FLAGS PKEY_INDEX"
	" MIN_RNR_TIMER PATH_MIG_STATE",
	"UD SQE RTS | - | CUR_STATE QKEY",
	"UC SQE RTS | - | CUR_STATE ACCESS_FLAGS",
	"RC,XS,XR SQE RTS | - | -",
	"* INIT,RTR,RTS,SQD,SQE,ERR RESET | - | -",
	"* INIT,RTR,RTS,SQD,SQE,ERR ERR | - | -",
};

static const struct { const char *name; int bit; } attr_bits[] = {
	{ "CUR_STATE", IBV_QP_CUR_STATE },
	{ "EN_SQD_ASYNC_NOTIFY", IBV_QP_EN_SQD_ASYNC_NOTIFY },
	{ "ACCESS_FLAGS", IBV_QP_ACCESS_FLAGS },
	{ "PKEY_INDEX", IBV_QP_PKEY_INDEX },
	{ "PORT", IBV_QP_PORT },
	{ "QKEY", IBV_QP_QKEY },
	{ "AV", IBV_QP_AV },
	{ "PATH_MTU", IBV_QP_PATH_MTU },
	{ "TIMEOUT", IBV_QP_TIMEOUT },
	{ "RETRY_CNT", IBV_QP_RETRY_CNT },
	{ "RNR_RETRY", IBV_QP_RNR_RETRY },
	{ "RQ_PSN", IBV_QP_RQ_PSN },
	{ "MAX_QP_RD_ATOMIC", IBV_QP_MAX_QP_RD_ATOMIC },
	{ "ALT_PATH", IBV_QP_ALT_PATH },
	{ "MIN_RNR_TIMER", IBV_QP_MIN_RNR_TIMER },
	{ "SQ_PSN", IBV_QP_SQ_PSN },
	{ "MAX_DEST_RD_ATOMIC", IBV_QP_MAX_DEST_RD_ATOMIC },
	{ "PATH_MIG_STATE", IBV_QP_PATH_MIG_STATE },
	{ "DEST_QPN", IBV_QP_DEST_QPN },
	{ "RATE_LIMIT", IBV_QP_RATE_LIMIT },
};

struct expect {
	int legal;
	int req, opt;
};
static struct expect model[NTYPES][7][7];

static int lookup_index(const char *tok, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(tok, names[i]))
			return i;
	fprintf(stderr, "expect table: unknown name '%s'\n", tok);
	exit(1);
}

/* Parses a comma list into a bitmap of indices ("*" = all). */
static unsigned parse_set(const char *s, const char *const *names, int n)
{
	char buf[128], *save = NULL;
	unsigned set = 0;

	if (!strcmp(s, "*"))
		return (1u << n) - 1;
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		set |= 1u << lookup_index(t, names, n);
	return set;
}

static int parse_mask(const char *s)
{
	char buf[512], *save = NULL;
	int m = 0;

	snprintf(buf, sizeof(buf), "%s", s);
	for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		if (!strcmp(t, "-"))
			continue;
		size_t i;
		for (i = 0; i < sizeof(attr_bits) / sizeof(attr_bits[0]); i++)
			if (!strcmp(t, attr_bits[i].name))
				break;
		if (i == sizeof(attr_bits) / sizeof(attr_bits[0])) {
			fprintf(stderr, "expect table: unknown bit '%s'\n", t);
			exit(1);
		}
		m |= attr_bits[i].bit;
	}
	return m;
}

static void build_model(void)
{
	for (size_t r = 0; r < sizeof(expect_rows) / sizeof(expect_rows[0]); r++) {
		char row[512], tset[64], cset[64], nset[64], req[256], opt[256];

		snprintf(row, sizeof(row), "%s", expect_rows[r]);
		char *bar1 = strchr(row, '|'), *bar2 = bar1 ? strchr(bar1 + 1, '|') : NULL;
		if (!bar2 || sscanf(row, "%63s %63s %63s", tset, cset, nset) != 3) {
			fprintf(stderr, "expect table: bad row %zu\n", r);
			exit(1);
		}
		*bar1 = *bar2 = '\0';
		snprintf(req, sizeof(req), "%s", bar1 + 1);
		snprintf(opt, sizeof(opt), "%s", bar2 + 1);
		unsigned ts = parse_set(tset, type_tags, NTYPES);
		unsigned cs = parse_set(cset, st_tags, 7), ns = parse_set(nset, st_tags, 7);
		int rq = parse_mask(req), op = parse_mask(opt);
		for (int t = 0; t < NTYPES; t++)
			for (int c = 0; c < 7; c++)
				for (int n = 0; n < 7; n++) {
					if (!(ts >> t & 1) || !(cs >> c & 1) || !(ns >> n & 1))
						continue;
					if (model[t][c][n].legal) {
						fprintf(stderr, "expect table: duplicate row %zu\n", r);
						exit(1);
					}
					model[t][c][n] = (struct expect){ 1, rq, op };
				}
	}
}

/* The rule stated in the brief, written the obvious way. */
static int naive_ok(int t, int cur, const struct ibv_qp_attr *a, int mask)
{
	int next = (mask & IBV_QP_STATE) ? (int)a->qp_state : cur;

	if (next < 0 || next > 6)
		return 0;
	const struct expect *e = &model[t][cur][next];
	if (!e->legal)
		return 0;
	if ((mask & e->req) != e->req)
		return 0;
	if (mask & ~(e->req | e->opt | IBV_QP_STATE))
		return 0;
	if (mask & IBV_QP_CUR_STATE) {
		if (cur != IBV_QPS_RTR && cur != IBV_QPS_RTS && cur != IBV_QPS_SQD &&
		    cur != IBV_QPS_SQE)
			return 0;
		if ((int)a->cur_qp_state != cur)
			return 0;
	}
	return 1;
}

static int check(int t, int cur, int next, int mask)
{
	struct ibv_qp_attr a = { .qp_state = (enum ibv_qp_state)next,
				 .cur_qp_state = (enum ibv_qp_state)cur };

	return srn_qp_check_transition(types[t], (enum ibv_qp_state)cur, &a, mask);
}

static void test_table(void)
{
	char b1[256], b2[256];

	for (int t = 0; t < NTYPES; t++)
		for (int c = 0; c < 7; c++)
			for (int n = 0; n < 7; n++) {
				const struct expect *e = &model[t][c][n];
				int req = -1, opt = -1;
				int rc = srn_qp_transition_masks(types[t], c, n, &req, &opt);
				const char *tn = type_tags[t], *cn = st_tags[c], *nn = st_tags[n];

				if (!e->legal) {
					CHECK(rc == -EINVAL, "%s %s->%s should be illegal", tn, cn, nn);
					CHECK(check(t, c, n, IBV_QP_STATE) == -EINVAL,
					      "%s %s->%s with STATE accepted", tn, cn, nn);
					for (int b = 1; b < 32; b++)
						CHECK(check(t, c, n, IBV_QP_STATE | (int)(1u << b)) == -EINVAL,
						      "%s %s->%s with bit %d accepted", tn, cn, nn, b);
					continue;
				}
				CHECK(rc == 0, "%s %s->%s should be legal", tn, cn, nn);
				CHECK(req == e->req, "%s %s->%s required %s, expected %s", tn, cn, nn,
				      srn_qp_mask_str(req, b1, sizeof(b1)),
				      srn_qp_mask_str(e->req, b2, sizeof(b2)));
				CHECK(opt == e->opt, "%s %s->%s optional %s, expected %s", tn, cn, nn,
				      srn_qp_mask_str(opt, b1, sizeof(b1)),
				      srn_qp_mask_str(e->opt, b2, sizeof(b2)));

				/* Every subset of the optional bits, with all the
				 * required ones, is accepted. */
				int opt_bits[26], nopt = 0;
				for (int b = 0; b < 26; b++)
					if (e->opt >> b & 1)
						opt_bits[nopt++] = 1 << b;
				for (int s = 0; s < 1 << nopt; s++) {
					int m = IBV_QP_STATE | e->req;
					for (int i = 0; i < nopt; i++)
						if (s >> i & 1)
							m |= opt_bits[i];
					CHECK(check(t, c, n, m) == 0, "%s %s->%s refused %s", tn, cn, nn,
					      srn_qp_mask_str(m, b1, sizeof(b1)));
					/* Same state: STATE itself may be left out. */
					if (c == n)
						CHECK(check(t, c, n, m & ~IBV_QP_STATE) == 0,
						      "%s %s->%s refused %s", tn, cn, nn,
						      srn_qp_mask_str(m & ~IBV_QP_STATE, b1, sizeof(b1)));
				}
				int full = IBV_QP_STATE | e->req | e->opt;
				for (int b = 0; b < 32; b++) {
					int bit = (int)(1u << b);
					if (e->req & bit)
						CHECK(check(t, c, n, full & ~bit) == -EINVAL,
						      "%s %s->%s accepted without required %s", tn, cn,
						      nn, srn_qp_mask_str(bit, b1, sizeof(b1)));
					else if (!(full & bit))
						CHECK(check(t, c, n, full | bit) == -EINVAL,
						      "%s %s->%s accepted stray %s", tn, cn, nn,
						      srn_qp_mask_str(bit, b1, sizeof(b1)));
				}
			}
}

static void test_cur_state(void)
{
	for (int t = 0; t < NTYPES; t++)
		for (int c = 0; c < 7; c++)
			for (int n = 0; n < 7; n++) {
				const struct expect *e = &model[t][c][n];
				if (!e->legal)
					continue;
				int m = IBV_QP_STATE | e->req | IBV_QP_CUR_STATE;
				struct ibv_qp_attr a = { .qp_state = (enum ibv_qp_state)n };
				for (int claim = 0; claim < 7; claim++) {
					a.cur_qp_state = (enum ibv_qp_state)claim;
					int want = (e->opt & IBV_QP_CUR_STATE) && claim == c ? 0 : -EINVAL;
					CHECK(srn_qp_check_transition(types[t], c, &a, m) == want,
					      "%s %s->%s CUR_STATE=%s: expected %d", type_tags[t],
					      st_tags[c], st_tags[n], st_tags[claim], want);
				}
			}
	/* The rule itself, apart from the table: CUR_STATE is refused in
	 * RESET/INIT/ERR even where a table might allow it. */
	for (int c = 0; c < 7; c++) {
		int in_set = c == IBV_QPS_RTR || c == IBV_QPS_RTS || c == IBV_QPS_SQD ||
			     c == IBV_QPS_SQE;
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .cur_qp_state = c };
		char why[256];
		int rc = srn_qp_explain_transition(IBV_QPT_UD, c, &a,
						   IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_SQ_PSN,
						   why, sizeof(why));
		if (!in_set)
			CHECK(rc == -EINVAL && strstr(why, "CUR_STATE"),
			      "UD %s: CUR_STATE not refused by name (%s)", st_tags[c], why);
	}
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

static void test_random(void)
{
	for (int i = 0; i < 400000; i++) {
		int t = (int)(rnd() % NTYPES), c = (int)(rnd() % 7);
		/* A next state now and then outside the enum. */
		int n = (int)(rnd() % 9) - 1;
		int m;
		if (n >= 0 && n < 7 && model[t][c][n].legal && rnd() % 4) {
			const struct expect *e = &model[t][c][n];
			m = ((int)rnd() & (e->req | e->opt)) | e->req;
			if (rnd() % 3 == 0)
				m ^= (int)(1u << (rnd() % 32));
			if (rnd() % 2)
				m |= IBV_QP_STATE;
		} else {
			m = (int)(rnd() & rnd());
		}
		struct ibv_qp_attr a = { .qp_state = (enum ibv_qp_state)n,
					 .cur_qp_state = (enum ibv_qp_state)(rnd() % 4 ? c : (int)(rnd() % 7)) };
		int want = naive_ok(t, c, &a, m) ? 0 : -EINVAL;
		int got = srn_qp_check_transition(types[t], c, &a, m);
		char b[256];
		CHECK(got == want, "random: %s cur %s next %d mask %s cur_qp_state %d: got %d want %d",
		      type_tags[t], st_tags[c], n, srn_qp_mask_str(m, b, sizeof(b)),
		      (int)a.cur_qp_state, got, want);
	}
}

static void test_odd_inputs(void)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT };
	int r, o;

	/* No STATE bit: the transition is cur->cur. */
	a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
	CHECK(srn_qp_check_transition(IBV_QPT_RC, IBV_QPS_RTS, &a, IBV_QP_ACCESS_FLAGS) == 0,
	      "RC RTS modify of ACCESS_FLAGS alone refused");
	CHECK(srn_qp_check_transition(IBV_QPT_RC, IBV_QPS_RTR, &a, 0) == -EINVAL,
	      "RC RTR->RTR is not a transition");
	CHECK(srn_qp_check_transition(IBV_QPT_UD, IBV_QPS_SQE, &a, 0) == -EINVAL,
	      "UD SQE->SQE is not a transition");
	CHECK(srn_qp_check_transition(IBV_QPT_UD, IBV_QPS_RESET, NULL, 0) == 0,
	      "RESET->RESET with mask 0 refused");
	CHECK(srn_qp_check_transition(IBV_QPT_UD, IBV_QPS_RESET, NULL, IBV_QP_STATE) == -EINVAL,
	      "NULL attr with STATE accepted");
	/* Types without rules. */
	a.qp_state = IBV_QPS_RESET;
	CHECK(srn_qp_check_transition(IBV_QPT_RAW_PACKET, IBV_QPS_INIT, &a, IBV_QP_STATE) == -EINVAL,
	      "RAW_PACKET accepted");
	CHECK(srn_qp_check_transition((enum ibv_qp_type)0, IBV_QPS_INIT, &a, IBV_QP_STATE) == -EINVAL,
	      "QP type 0 accepted");
	CHECK(srn_qp_transition_masks(IBV_QPT_DRIVER, IBV_QPS_INIT, IBV_QPS_RESET, &r, &o) == -EINVAL,
	      "DRIVER has masks");
	/* States out of the enum. */
	CHECK(srn_qp_check_transition(IBV_QPT_RC, (enum ibv_qp_state)7, &a, IBV_QP_STATE) == -EINVAL,
	      "current state 7 accepted");
	CHECK(srn_qp_check_transition(IBV_QPT_RC, (enum ibv_qp_state)-1, &a, IBV_QP_STATE) == -EINVAL,
	      "current state -1 accepted");
	a.qp_state = (enum ibv_qp_state)7;
	CHECK(srn_qp_check_transition(IBV_QPT_RC, IBV_QPS_INIT, &a, IBV_QP_STATE) == -EINVAL,
	      "next state 7 accepted");
	CHECK(srn_qp_transition_masks(IBV_QPT_RC, IBV_QPS_INIT, (enum ibv_qp_state)7, &r, &o) == -EINVAL,
	      "masks for next state 7");
	/* Outputs untouched on failure; NULL outputs allowed on success. */
	r = o = 12345;
	CHECK(srn_qp_transition_masks(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_ERR, &r, &o) == -EINVAL &&
	      r == 12345 && o == 12345, "RESET->ERR masks");
	CHECK(srn_qp_transition_masks(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, NULL, NULL) == 0,
	      "NULL outputs");
}

static void test_names(void)
{
	char b[256], why[256];

	for (int s = 0; s < 7; s++)
		CHECK(!strcmp(srn_qp_state_name(s), st_tags[s]), "state name %d", s);
	CHECK(!strcmp(srn_qp_state_name((enum ibv_qp_state)7), "?"), "state name 7");
	CHECK(!strcmp(srn_qp_type_name(IBV_QPT_UD), "UD"), "type name UD");
	for (size_t i = 0; i < sizeof(attr_bits) / sizeof(attr_bits[0]); i++)
		CHECK(srn_qp_attr_bit_name(attr_bits[i].bit) &&
		      !strcmp(srn_qp_attr_bit_name(attr_bits[i].bit), attr_bits[i].name),
		      "bit name %s", attr_bits[i].name);
	CHECK(!strcmp(srn_qp_attr_bit_name(IBV_QP_STATE), "STATE"), "bit name STATE");
	CHECK(!strcmp(srn_qp_attr_bit_name(IBV_QP_RATE_LIMIT), "RATE_LIMIT"), "bit RATE_LIMIT");
	CHECK(!srn_qp_attr_bit_name(0) && !srn_qp_attr_bit_name(3) && !srn_qp_attr_bit_name(1 << 26),
	      "non-bits have names");
	CHECK(!strcmp(srn_qp_mask_str(0, b, sizeof(b)), "0"), "empty mask string");
	CHECK(!strcmp(srn_qp_mask_str(IBV_QP_STATE | IBV_QP_PORT | 1 << 30, b, sizeof(b)),
		      "STATE|PORT|1<<30"), "mask string: %s", b);
	char tiny[8];
	srn_qp_mask_str(IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PATH_MTU, tiny, sizeof(tiny));
	CHECK(strlen(tiny) < sizeof(tiny), "mask string overflow");

	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
	CHECK(srn_qp_explain_transition(IBV_QPT_RC, IBV_QPS_INIT, &a,
					IBV_QP_STATE | IBV_QP_AV | IBV_QP_RQ_PSN |
					IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
					why, sizeof(why)) == -EINVAL &&
	      !strcmp(why, "RC INIT->RTR: missing required PATH_MTU|DEST_QPN"), "explain: %s", why);
	a.qp_state = IBV_QPS_ERR;
	CHECK(srn_qp_explain_transition(IBV_QPT_UD, IBV_QPS_RESET, &a, IBV_QP_STATE, why,
					sizeof(why)) == -EINVAL &&
	      strstr(why, "RESET->ERR") && strstr(why, "no such transition"), "explain: %s", why);
	a.qp_state = IBV_QPS_RESET;
	CHECK(srn_qp_explain_transition(IBV_QPT_UD, IBV_QPS_INIT, &a, IBV_QP_STATE | IBV_QP_QKEY,
					why, sizeof(why)) == -EINVAL &&
	      strstr(why, "not allowed") && strstr(why, "QKEY"), "explain: %s", why);
	CHECK(srn_qp_explain_transition(IBV_QPT_UD, IBV_QPS_INIT, &a, IBV_QP_STATE, why,
					sizeof(why)) == 0 && why[0] == '\0', "explain ok: %s", why);

	CHECK(srn_qp_mask_supported(SRN_QP_ATTR_CMD_BITS) == 0, "cmd bits unsupported");
	for (int b2 = 21; b2 < 32; b2++)
		CHECK(srn_qp_mask_supported(IBV_QP_STATE | (int)(1u << b2)) == -EOPNOTSUPP,
		      "bit %d supported by rxe's path", b2);
}

/* ---- value checks ---- */

static const struct srn_qp_limits lim = {
	.port_max_mtu = IBV_MTU_4096, .max_rd_atomic = 16, .max_dest_rd_atomic = 32,
	.gid_tbl_len = 4, .pkey_tbl_len = 2, .max_qp_wr = 1024, .max_sge = 8,
	.max_inline = 256,
};

static const int value_mask = IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY |
	IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_AV |
	IBV_QP_PATH_MTU | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_RQ_PSN |
	IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN |
	IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_PATH_MIG_STATE | IBV_QP_CAP | IBV_QP_DEST_QPN;

static struct ibv_qp_attr good_attr(void)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS, .cur_qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
		.path_mig_state = IBV_MIG_MIGRATED, .qkey = 0x11111111, .rq_psn = 1, .sq_psn = 2,
		.dest_qp_num = 0x123,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 64 },
		.ah_attr = { .grh = { .sgid_index = 0, .hop_limit = 1 }, .is_global = 1,
			     .port_num = 1 },
		.pkey_index = 0, .en_sqd_async_notify = 1, .max_rd_atomic = 1,
		.max_dest_rd_atomic = 1, .min_rnr_timer = 12, .port_num = 1, .timeout = 14,
		.retry_cnt = 7, .rnr_retry = 7,
	};
	return a;
}

static int vals(enum ibv_qp_type t, const struct ibv_qp_attr *a, int mask)
{
	return srn_qp_check_attr_values(t, a, mask, &lim);
}

/* Sets one field with `set`, then expects `ok_val` to pass and `bad_val`
 * to fail, both with the whole value mask and with the field's bit alone,
 * and the bad value to be ignored when its bit is absent. */
#define EDGE(bit, field, ok_val, bad_val)                                          \
	do {                                                                       \
		struct ibv_qp_attr a_ = good_attr();                               \
		a_.field = ok_val;                                                 \
		CHECK(vals(IBV_QPT_RC, &a_, value_mask) == 0, #field " = " #ok_val " refused"); \
		CHECK(vals(IBV_QPT_RC, &a_, bit) == 0, #field " = " #ok_val " refused alone"); \
		a_.field = bad_val;                                                \
		CHECK(vals(IBV_QPT_RC, &a_, value_mask) == -EINVAL,                \
		      #field " = " #bad_val " accepted");                          \
		CHECK(vals(IBV_QPT_RC, &a_, bit) == -EINVAL,                       \
		      #field " = " #bad_val " accepted alone");                    \
		CHECK(vals(IBV_QPT_RC, &a_, value_mask & ~(bit)) == 0,             \
		      #field " = " #bad_val " checked without its bit");           \
	} while (0)

static void test_values(void)
{
	struct ibv_qp_attr a = good_attr();
	char why[256];

	CHECK(vals(IBV_QPT_RC, &a, value_mask) == 0, "good RC attributes refused");
	CHECK(vals(IBV_QPT_UC, &a, value_mask) == 0, "good UC attributes refused");
	CHECK(vals(IBV_QPT_UD, &a, value_mask & ~IBV_QP_ACCESS_FLAGS) == 0,
	      "good UD attributes refused");
	CHECK(vals(IBV_QPT_RC, NULL, 0) == 0, "mask 0 with NULL attr refused");
	CHECK(vals(IBV_QPT_RAW_PACKET, &a, IBV_QP_PORT) == -EINVAL, "RAW_PACKET values accepted");

	EDGE(IBV_QP_PORT, port_num, 1, 2);
	EDGE(IBV_QP_PORT, port_num, 1, 0);
	EDGE(IBV_QP_PKEY_INDEX, pkey_index, 1, 2);
	EDGE(IBV_QP_PATH_MTU, path_mtu, IBV_MTU_256, (enum ibv_mtu)0);
	EDGE(IBV_QP_PATH_MTU, path_mtu, IBV_MTU_4096, (enum ibv_mtu)6);
	EDGE(IBV_QP_TIMEOUT, timeout, 31, 32);
	EDGE(IBV_QP_RETRY_CNT, retry_cnt, 7, 8);
	EDGE(IBV_QP_RNR_RETRY, rnr_retry, 7, 8);
	EDGE(IBV_QP_MIN_RNR_TIMER, min_rnr_timer, 31, 32);
	EDGE(IBV_QP_MAX_QP_RD_ATOMIC, max_rd_atomic, 16, 17);
	EDGE(IBV_QP_MAX_DEST_RD_ATOMIC, max_dest_rd_atomic, 32, 33);
	EDGE(IBV_QP_DEST_QPN, dest_qp_num, 0xffffff, 0x1000000);
	EDGE(IBV_QP_PATH_MIG_STATE, path_mig_state, IBV_MIG_ARMED, (enum ibv_mig_state)3);
	EDGE(IBV_QP_EN_SQD_ASYNC_NOTIFY, en_sqd_async_notify, 0, 2);
	EDGE(IBV_QP_AV, ah_attr.is_global, 1, 0);
	EDGE(IBV_QP_AV, ah_attr.grh.sgid_index, 3, 4);
	EDGE(IBV_QP_AV, ah_attr.port_num, 1, 0);
	EDGE(IBV_QP_AV, ah_attr.port_num, 1, 2);
	EDGE(IBV_QP_CAP, cap.max_send_wr, 1024, 1025);
	EDGE(IBV_QP_CAP, cap.max_send_sge, 8, 9);
	EDGE(IBV_QP_CAP, cap.max_inline_data, 256, 257);
	/* The port's MTU, not the protocol's, is the upper bound. */
	{
		struct srn_qp_limits small = lim;
		a = good_attr();
		small.port_max_mtu = IBV_MTU_1024;
		a.path_mtu = IBV_MTU_1024;
		CHECK(srn_qp_check_attr_values(IBV_QPT_RC, &a, IBV_QP_PATH_MTU, &small) == 0,
		      "path_mtu = port MTU refused");
		a.path_mtu = IBV_MTU_2048;
		CHECK(srn_qp_check_attr_values(IBV_QPT_RC, &a, IBV_QP_PATH_MTU, &small) == -EINVAL,
		      "path_mtu above port MTU accepted");
	}
	/* PSNs are masked by the caller, never refused. */
	a = good_attr();
	a.rq_psn = a.sq_psn = 0xffffffffu;
	CHECK(vals(IBV_QPT_RC, &a, IBV_QP_RQ_PSN | IBV_QP_SQ_PSN) == 0, "wide PSNs refused");
	/* Q_Keys are opaque, any value. */
	a.qkey = 0xffffffffu;
	CHECK(vals(IBV_QPT_UD, &a, IBV_QP_QKEY) == 0, "Q_Key refused");
	/* No alternate path on RoCE, whatever the value. */
	a = good_attr();
	a.alt_ah_attr = a.ah_attr;
	a.alt_port_num = 1;
	CHECK(vals(IBV_QPT_RC, &a, IBV_QP_ALT_PATH) == -EINVAL, "ALT_PATH accepted");
	/* Access flags, one bit at a time: rxe's set. */
	const unsigned ok_access = 0x1 | 0x2 | 0x4 | 0x8 | 0x10 | 0x40 | 0x100 | 0x200 |
				   (((1u << 29) << 1) - (1u << 20));
	for (int b = 0; b < 32; b++) {
		a = good_attr();
		a.qp_access_flags = 1u << b;
		int want = (ok_access >> b & 1) ? 0 : -EINVAL;
		CHECK(vals(IBV_QPT_RC, &a, IBV_QP_ACCESS_FLAGS) == want, "RC access bit %d: want %d",
		      b, want);
		CHECK(vals(IBV_QPT_XRC_SEND, &a, IBV_QP_ACCESS_FLAGS) == want,
		      "XRC access bit %d: want %d", b, want);
	}
	a = good_attr();
	CHECK(vals(IBV_QPT_UD, &a, IBV_QP_ACCESS_FLAGS) == -EINVAL, "UD took access flags");
	a.qp_access_flags = 0;
	CHECK(vals(IBV_QPT_UC, &a, IBV_QP_ACCESS_FLAGS) == 0, "no access refused");

	a = good_attr();
	a.timeout = 40;
	CHECK(srn_qp_explain_attr_values(IBV_QPT_RC, &a, IBV_QP_TIMEOUT, &lim, why, sizeof(why)) ==
		      -EINVAL && strstr(why, "timeout"), "explain values: %s", why);
	a.timeout = 1;
	CHECK(srn_qp_explain_attr_values(IBV_QPT_RC, &a, IBV_QP_TIMEOUT, &lim, why, sizeof(why)) ==
		      0 && why[0] == '\0', "explain values ok: %s", why);
}

static void test_cap(void)
{
	struct ibv_qp_cap c = { .max_send_wr = 1024, .max_recv_wr = 1024, .max_send_sge = 8,
				.max_recv_sge = 8, .max_inline_data = 256 };

	CHECK(srn_qp_check_cap(&c, false, &lim) == 0, "cap at limits refused");
	c.max_recv_wr = 1025;
	CHECK(srn_qp_check_cap(&c, false, &lim) == -EINVAL, "max_recv_wr over limit accepted");
	CHECK(srn_qp_check_cap(&c, true, &lim) == 0, "recv sizes checked with an SRQ");
	c.max_recv_wr = 1024;
	c.max_recv_sge = 9;
	CHECK(srn_qp_check_cap(&c, false, &lim) == -EINVAL, "max_recv_sge over limit accepted");
	CHECK(srn_qp_check_cap(&c, true, &lim) == 0, "recv sge checked with an SRQ");
	c.max_recv_sge = 8;
	c.max_send_wr = 1025;
	CHECK(srn_qp_check_cap(&c, true, &lim) == -EINVAL, "max_send_wr over limit accepted");
	c.max_send_wr = 1;
	c.max_send_sge = 9;
	CHECK(srn_qp_check_cap(&c, true, &lim) == -EINVAL, "max_send_sge over limit accepted");
	c.max_send_sge = 1;
	c.max_inline_data = 257;
	CHECK(srn_qp_check_cap(&c, true, &lim) == -EINVAL, "max_inline over limit accepted");
}

int main(void)
{
	build_model();
	test_table();
	test_cur_state();
	test_random();
	test_odd_inputs();
	test_names();
	test_values();
	test_cap();
	if (srn_check_failures) {
		fprintf(stderr, "%d failure(s)\n", srn_check_failures);
		return 1;
	}
	printf("qp rules: all checks passed\n");
	return 0;
}
