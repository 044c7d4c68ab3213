/*
 * explain_dead.h - the post-mortem of a process that died inside, or
 * beside, softrnic: what its segment's last operation record says
 * (seg_layout.h, struct srn_diag_busy).
 */
#ifndef SRN_TOOLS_EXPLAIN_DEAD_H
#define SRN_TOOLS_EXPLAIN_DEAD_H

#include <stdio.h>

#include "diag_read.h"

/* One paragraph per device of a process that was killed or crashed
 * (SRN_PROC_DEAD); returns how many it printed. */
unsigned srn_explain_dead(FILE *out, const struct srn_seg_set *set);

#endif
