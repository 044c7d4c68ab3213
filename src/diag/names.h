/*
 * names.h - names for what the diagnostics print (names.c).
 */
#ifndef SRN_DIAG_NAMES_H
#define SRN_DIAG_NAMES_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#include "diag/shm.h"

/* "RETRY_EXC_ERR" for IBV_WC_RETRY_EXC_ERR. */
const char *srn_diag_wc_status_name(enum ibv_wc_status st);
/* "ACK", "RNR NAK (timer 14)", "NAK remote access error", ... */
const char *srn_diag_syndrome_str(uint8_t syndrome, char *buf, size_t len);
/* What the peer said last: "ACK PSN 0x000123 12.3 ms ago" or "nothing". */
void srn_diag_last_peer_str(struct srn_diag_obj *o, char *buf, size_t len);

#endif
