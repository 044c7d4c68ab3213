/*
 * dcqcn_env.c - SOFTRNIC_DCQCN_* into struct srn_dcqcn_cfg (dcqcn_env.h).
 *
 * One table names every parameter, where it lives in the struct and its
 * largest value, so the names the user types, the ones docs/congestion.md
 * lists and the struct cannot drift apart.  A misspelt name is an error,
 * not a silently ignored setting.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "transport/dcqcn_env.h"

enum kind { U32, BOOL };

struct param {
	const char *name;
	size_t off;
	enum kind kind;
	uint32_t max;
};

#define P(field, max) { #field, offsetof(struct srn_dcqcn_cfg, field), U32, max }
#define B(field) { #field, offsetof(struct srn_dcqcn_cfg, field), BOOL, 1 }

static const struct param params[] = {
	B(rp_enable),
	B(np_enable),
	P(line_rate, 4000000),		/* Mb/s: 4 Tb/s is plenty */
	B(pace_line_rate),
	P(rpg_max_rate, 4000000),
	P(rpg_min_rate, 4000000),
	P(rpg_ai_rate, 4000000),
	P(rpg_hai_rate, 4000000),
	P(rpg_time_reset, 131071),	/* mlx5's ranges */
	P(rpg_byte_reset, 32767),
	P(rpg_threshold, 31),
	P(rpg_gd, 15),
	P(rpg_min_dec_fac, 100),
	P(rate_to_set_on_first_cnp, 4000000),
	P(dce_tcp_g, 1023),
	P(dce_tcp_rtt, 131071),
	P(initial_alpha_value, 1023),
	P(rate_reduce_monitor_period, 1000000),
	B(clamp_tgt_rate),
	B(clamp_tgt_rate_after_time_inc),
	P(min_time_between_cnps, 4095),
	P(cnp_dscp, 63),
};

static int set_one(struct srn_dcqcn_cfg *cfg, const char *name, size_t nlen, const char *val,
		   char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++) {
		const struct param *p = &params[i];
		char *end;
		unsigned long v;

		if (strlen(p->name) != nlen || strncasecmp(p->name, name, nlen))
			continue;
		errno = 0;
		v = strtoul(val, &end, 10);
		/* Digits only: strtoul would take "-1", " 5" and "0x10". */
		if (!*val || *end || errno || val[strspn(val, "0123456789")] || v > p->max) {
			snprintf(err, errlen, "%s%.*s=%s: want an integer 0..%u", SRN_DCQCN_ENV_PREFIX,
				 (int)nlen, name, val, p->max);
			return -EINVAL;
		}
		if (p->kind == BOOL)
			*(bool *)((char *)cfg + p->off) = v != 0;
		else
			*(uint32_t *)((char *)cfg + p->off) = (uint32_t)v;
		return 0;
	}
	snprintf(err, errlen, "%s%.*s: no such DCQCN parameter (docs/congestion.md lists them)",
		 SRN_DCQCN_ENV_PREFIX, (int)nlen, name);
	return -EINVAL;
}

int srn_dcqcn_cfg_env(struct srn_dcqcn_cfg *cfg, char *const *envp, char *err, size_t errlen)
{
	const size_t plen = strlen(SRN_DCQCN_ENV_PREFIX);

	for (; envp && *envp; envp++) {
		const char *kv = *envp, *eq;
		int rc;

		if (strncmp(kv, SRN_DCQCN_ENV_PREFIX, plen))
			continue;
		eq = strchr(kv + plen, '=');
		if (!eq)
			continue;
		rc = set_one(cfg, kv + plen, (size_t)(eq - kv - plen), eq + 1, err, errlen);
		if (rc)
			return rc;
	}
	srn_dcqcn_cfg_sanitize(cfg);
	return 0;
}
