/* Device configuration: which devices exist, their IP address, UDP port and
 * link MTU.
 *
 * A softrnic device is configured, not discovered. The sources, first match
 * wins: the SOFTRNIC_DEVICES environment variable, else the file named by
 * SOFTRNIC_CONFIG, else one zero-config device "softrnic0" on the host's
 * loopback address, shared by every process (addr=auto; see srn_udp_open). Entry syntax, in both places:
 *
 *     name=softrnic0,addr=10.0.0.1,port=4791,mtu=1500,share=1
 *
 * addr is required ("auto": 127.0.0.1 shared by the user's processes, as
 * a NIC's address is, or with share=0 a free 127.0.0.N of its own; IPv6
 * addresses may be written bare, in brackets, or with a %ifname scope);
 * name defaults to softrnicN (N = device index), port to 4791, mtu to the
 * MTU of the interface that carries addr, share to 1: other processes of
 * the same user may be given the same address and port (udp_group.h);
 * share=0 binds it alone.
 *
 * Invariants after a successful srn_config_load: names are unique and
 * non-empty; no two non-auto devices share an address and port; port is
 * non-zero; link_mtu is either the configured value (576..65536) or the
 * detected one, or 0 when addr is on no interface yet (srn_udp_open then
 * detects it after binding).
 */
#ifndef SRN_LINK_CONFIG_H
#define SRN_LINK_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <net/if.h>
#include <sys/socket.h>

#define SRN_MAX_DEVICES 8
#define SRN_ROCE_PORT 4791          /* IANA RoCEv2 UDP destination port */
#define SRN_LOOPBACK_MTU 65536      /* Linux lo default */
/* Header room rxe reserves between the link MTU and the IB path MTU
 * (RXE_MAX_HDR_LENGTH): IPv6 40 + UDP 8 + BTH 12 + the largest extended
 * headers + ICRC 4, rounded up. Using the same rule keeps our port MTU equal
 * to what an rxe peer on the same link advertises. */
#define SRN_LINK_HDR_ROOM 80
#define SRN_LINK_MTU_MIN 576        /* smallest IPv4 MTU every host must accept */
#define SRN_LINK_MTU_MAX 65536

struct srn_dev_cfg {
	char name[64];                 /* e.g. "softrnic0" */
	int family;                    /* AF_INET / AF_INET6 */
	struct sockaddr_storage addr;  /* local address (port field unused) */
	uint16_t port;                 /* UDP port, host order; also the port peers are sent to */
	uint32_t link_mtu;             /* IP MTU of the interface carrying addr */
	bool auto_loopback;            /* at open: the host's shared 127.0.0.N (share=0: a free one) */
	bool exclusive;                /* share=0: no other process may bind addr:port (udp_group.h) */
};

/* Load the device list (see the top of this file). Returns the number of
 * devices (>= 1), -EINVAL for a syntax or value error, or -errno when the
 * SOFTRNIC_CONFIG file cannot be read (-EINVAL when it is not a regular
 * file, -EFBIG past 64 KiB); on error err holds one human-readable
 * line naming the source and the offending entry. */
int srn_config_load(struct srn_dev_cfg *out, int max, char *err, size_t errlen);

enum srn_cfg_syntax {
	SRN_CFG_ENTRIES,    /* SOFTRNIC_DEVICES: entries separated by ';' */
	SRN_CFG_LINES,      /* a SOFTRNIC_CONFIG file: one entry per line, '#' comments */
};

/* Parse len bytes of text (need not be NUL-terminated; a NUL byte in it is
 * an error) into out[0..max). source names the input in messages. Returns
 * the number of devices (>= 1) or -EINVAL/-ENOMEM with one line in err.
 * No MTU detection: srn_config_load does that. */
int srn_config_parse(const char *text, size_t len, enum srn_cfg_syntax syntax, const char *source,
					 struct srn_dev_cfg *out, int max, char *err, size_t errlen);

/* Parse one entry ("name=...,addr=...") into cfg as device number index.
 * where prefixes error messages (e.g. "SOFTRNIC_DEVICES: entry 2"). The
 * string is not modified. Returns 0 or -EINVAL. */
int srn_config_parse_entry(const char *entry, int index, struct srn_dev_cfg *cfg,
						   const char *where, char *err, size_t errlen);

/* Name of the interface that owns address sa (same matching as below):
 * 0, or -ENODEV when no interface in this network namespace has it. */
int srn_link_ifname(const struct sockaddr *sa, char ifname[IF_NAMESIZE]);

/* MTU of the interface that owns address sa (exact match; any 127/8 or ::1
 * address maps to the loopback interface). Returns 0 and sets *mtu, or
 * -ENODEV when no interface in this network namespace has the address. */
int srn_link_detect_mtu(const struct sockaddr *sa, uint32_t *mtu);

/* IB MTU enum (IBV_MTU_256..IBV_MTU_4096 as 1..5): the largest whose payload
 * fits in link_mtu - SRN_LINK_HDR_ROOM, never below IBV_MTU_256. */
int srn_link_ib_mtu(uint32_t link_mtu);

/* Bytes of an IB MTU enum value (1..5 -> 256..4096); 0 for anything else. */
uint32_t srn_link_ib_mtu_bytes(int ib_mtu);

#endif
