/*
 * test_cc_dcqcn_env.c - SOFTRNIC_DCQCN_* parsing (transport/dcqcn_env.c):
 * every parameter of docs/congestion.md's table is settable by its mlx5
 * name in any case; other variables are left alone; a misspelt name, a
 * non-number, a negative or an out-of-range value is an error that names
 * the variable; sanitising keeps the rate machine's invariants.
 */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "transport/dcqcn_env.h"

static int parse(struct srn_dcqcn_cfg *c, const char *one, char *err)
{
	char *envp[] = { "PATH=/bin", "SOFTRNIC_DEVICES=x", (char *)one, NULL };

	srn_dcqcn_cfg_default(c);
	return srn_dcqcn_cfg_env(c, envp, err, 256);
}

int main(void)
{
	struct srn_dcqcn_cfg c, d;
	char err[256];
	char *all[] = {
		"SOFTRNIC_DCQCN_RP_ENABLE=0", "SOFTRNIC_DCQCN_NP_ENABLE=0",
		"SOFTRNIC_DCQCN_LINE_RATE=25000", "SOFTRNIC_DCQCN_RPG_MAX_RATE=20000",
		"SOFTRNIC_DCQCN_RPG_MIN_RATE=10", "SOFTRNIC_DCQCN_RPG_AI_RATE=40",
		"SOFTRNIC_DCQCN_RPG_HAI_RATE=400", "SOFTRNIC_DCQCN_RPG_TIME_RESET=55",
		"SOFTRNIC_DCQCN_RPG_BYTE_RESET=10000", "SOFTRNIC_DCQCN_RPG_THRESHOLD=5",
		"SOFTRNIC_DCQCN_RPG_GD=10", "SOFTRNIC_DCQCN_RPG_MIN_DEC_FAC=25",
		"SOFTRNIC_DCQCN_RATE_TO_SET_ON_FIRST_CNP=1000", "SOFTRNIC_DCQCN_DCE_TCP_G=1020",
		"SOFTRNIC_DCQCN_DCE_TCP_RTT=55", "SOFTRNIC_DCQCN_INITIAL_ALPHA_VALUE=512",
		"SOFTRNIC_DCQCN_RATE_REDUCE_MONITOR_PERIOD=50", "SOFTRNIC_DCQCN_CLAMP_TGT_RATE=1",
		"SOFTRNIC_DCQCN_CLAMP_TGT_RATE_AFTER_TIME_INC=0",
		"SOFTRNIC_DCQCN_min_time_between_cnps=50", "SOFTRNIC_DCQCN_Cnp_Dscp=26", NULL,
	};

	srn_dcqcn_cfg_default(&c);
	d = c;
	CHECK(srn_dcqcn_cfg_env(&c, all, err, sizeof(err)) == 0, "all: %s", err);
	CHECK(!c.rp_enable && !c.np_enable && c.line_rate == 25000 && c.rpg_max_rate == 20000 &&
		      c.rpg_min_rate == 10 && c.rpg_ai_rate == 40 && c.rpg_hai_rate == 400,
	      "rates");
	CHECK(c.rpg_time_reset == 55 && c.rpg_byte_reset == 10000 && c.rpg_threshold == 5 &&
		      c.rpg_gd == 10 && c.rpg_min_dec_fac == 25 && c.rate_to_set_on_first_cnp == 1000,
	      "rp");
	CHECK(c.dce_tcp_g == 1020 && c.dce_tcp_rtt == 55 && c.initial_alpha_value == 512 &&
		      c.rate_reduce_monitor_period == 50 && c.clamp_tgt_rate &&
		      !c.clamp_tgt_rate_after_time_inc, "alpha, clamps");
	CHECK(c.min_time_between_cnps == 50 && c.cnp_dscp == 26, "np, any case");
	/* Every field changed: the list covers the struct. */
	CHECK(memcmp(&c, &d, sizeof(c)) != 0, "changed");

	CHECK(parse(&c, "SOFTRNIC_DCQCN=1", err) == 0, "the bare prefix is not a parameter");
	CHECK(parse(&c, "SOFTRNIC_DCQCN_RPG_TIMERESET=5", err) == -EINVAL &&
		      strstr(err, "SOFTRNIC_DCQCN_RPG_TIMERESET") && strstr(err, "no such"),
	      "misspelt: %s", err);
	const char *bad[] = { "", "-1", " 5", "0x10", "5ms", "4294967296", "99999999999999999999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char kv[64];

		snprintf(kv, sizeof(kv), "SOFTRNIC_DCQCN_RPG_AI_RATE=%s", bad[i]);
		CHECK(parse(&c, kv, err) == -EINVAL && strstr(err, "RPG_AI_RATE"), "'%s': %s", bad[i],
		      err);
	}
	CHECK(parse(&c, "SOFTRNIC_DCQCN_DCE_TCP_G=1024", err) == -EINVAL, "g out of range");
	CHECK(parse(&c, "SOFTRNIC_DCQCN_RP_ENABLE=2", err) == -EINVAL, "bool 2");
	CHECK(parse(&c, "SOFTRNIC_DCQCN_CNP_DSCP=64", err) == -EINVAL, "dscp 64");
	/* Sanitised: 0 where 0 breaks an invariant. */
	CHECK(parse(&c, "SOFTRNIC_DCQCN_RPG_MIN_RATE=0", err) == 0 && c.rpg_min_rate == 1,
	      "min rate 0 -> 1");
	CHECK(parse(&c, "SOFTRNIC_DCQCN_DCE_TCP_RTT=0", err) == 0 && c.dce_tcp_rtt == 1, "rtt 0 -> 1");
	CHECK(parse(&c, "SOFTRNIC_DCQCN_RPG_GD=0", err) == 0 && c.rpg_gd == 1, "gd 0 -> 1");
	return srn_check_result();
}
