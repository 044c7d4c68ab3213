/*
 * limits.h - what the device advertises.  Values chosen to be at least
 * what Linux rxe advertises where rxe has a number, so programs sized for
 * rxe fit.
 */
#ifndef SRN_CORE_LIMITS_H
#define SRN_CORE_LIMITS_H

#define SRN_FW_VER "0.1.0"
#define SRN_VENDOR_ID 0x534e         /* "SN": no IEEE OUI is claimed */
#define SRN_VENDOR_PART_ID 1
#define SRN_MAX_MR_SIZE (~0ull)
#define SRN_MAX_QP 4000
#define SRN_MAX_QP_WR 16384
#define SRN_MAX_SGE 32
#define SRN_MAX_INLINE 1024
#define SRN_DEFAULT_INLINE 256        /* reported when a QP asks for less */
#define SRN_MAX_CQ 16384
#define SRN_MAX_CQE 4194303          /* mlx5's: ofi_rxm sizes one CQ for 256 peers */
#define SRN_MAX_MR 65536
#define SRN_MAX_PD 65536
#define SRN_MAX_RD_ATOMIC 128
#define SRN_MAX_MCAST_GRP 64
#define SRN_MAX_MCAST_QP_ATTACH 64
#define SRN_MAX_AH 65536
#define SRN_MAX_SRQ 4096
#define SRN_PKEY_TBL_LEN 1            /* index 0 = the default P_Key, wire/roce_hdr.h */
#define SRN_GID_TBL_LEN 1
#define SRN_MAX_MSG_SZ (1u << 31)

/* Transport tuning. */
#define SRN_SEND_WINDOW 512           /* unacknowledged packets per QP */
/* A full window reopens only once this many packets are acknowledged, so
 * a stream leaves in bursts that share system calls, not one message per
 * ACK. */
#define SRN_SEND_WINDOW_REOPEN 128
#define SRN_ACKREQ_EVERY 32           /* AckReq at least this often */

#endif
