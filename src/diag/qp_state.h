/*
 * qp_state.h - the one table of QP state names ("RTS" for IBV_QPS_RTS),
 * for the library's logs and refusals, the tools' reports and the tests.
 * Header only (no call edge, nothing to link), so the tools and tests,
 * which reach nothing inside the library, can use it too.
 */
#ifndef SRN_DIAG_QP_STATE_H
#define SRN_DIAG_QP_STATE_H

#include <infiniband/verbs.h>

/* "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"; "?" if out of range
 * (a state read from a segment another process wrote may be anything). */
static inline const char *srn_qp_state_name(unsigned s)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
		[IBV_QPS_RTS] = "RTS",     [IBV_QPS_SQD] = "SQD",   [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};
	return s < sizeof(names) / sizeof(names[0]) && names[s] ? names[s] : "?";
}

#endif
