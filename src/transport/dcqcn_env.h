/*
 * dcqcn_env.h - DCQCN parameters from the environment:
 * SOFTRNIC_DCQCN_<NAME>=<value>, NAME one of mlx5's parameter names
 * (docs/congestion.md, case-insensitive: SOFTRNIC_DCQCN_RPG_TIME_RESET=55)
 * or RP_ENABLE / NP_ENABLE / LINE_RATE.  Values are unsigned decimal
 * integers in the parameter's unit; booleans are 0 or 1.
 */
#ifndef SRN_TRANSPORT_DCQCN_ENV_H
#define SRN_TRANSPORT_DCQCN_ENV_H

#include <stddef.h>

#include "transport/dcqcn.h"

#define SRN_DCQCN_ENV_PREFIX "SOFTRNIC_DCQCN_"

/* Apply every SOFTRNIC_DCQCN_* entry of envp (NULL-terminated "K=V"
 * strings, as environ) to cfg, then sanitise it.  Returns 0, or -EINVAL
 * with a sentence naming the variable in err (cfg then half-applied:
 * callers fail the open). */
int srn_dcqcn_cfg_env(struct srn_dcqcn_cfg *cfg, char *const *envp, char *err, size_t errlen);

#endif /* SRN_TRANSPORT_DCQCN_ENV_H */
