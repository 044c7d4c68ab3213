/*
 * test_cc_cnp_wire.c - the CNP packer/parser (wire/cnp.c) and the ECN
 * marking helpers (wire/ecn.h):
 *  - srn_cnp_build() for the addresses of vector E1 (a CNP captured on a
 *    ConnectX-4 Lx) gives E1's 32 UDP payload bytes exactly, ICRC too;
 *  - srn_cnp_parse() takes E1, rejects other lengths and non-CNP opcodes;
 *  - marking CE keeps the IPv4 header checksum valid and the ICRC
 *    unchanged (it masks the TOS), never marks a Not-ECT packet.
 * With "--pcap FILE" it also writes E1 and two CNPs of its own as a pcap
 * for test_cc_cnp_tshark.sh.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "wire/cnp.h"
#include "wire/ecn.h"
#include "wire/opcode.h"

/* test_wire_util.c */
int wt_load_vectors(const char *path);
const uint8_t *wt_vec_frame(int i, size_t *len);
int wt_vec_find(const char *id);

#define ETH_LEN 14
#define IP4_LEN 20
#define UDP_LEN 8


static uint16_t ip_csum(const uint8_t *h, size_t len)
{
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < len; i += 2)
		s += (uint32_t)(h[i] << 8 | h[i + 1]);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* The meta (addresses, ports, ID, flags) of an Ethernet/IPv4/UDP frame. */
static void meta_of(const uint8_t *f, struct srn_ip_meta *m)
{
	const uint8_t *ip = f + ETH_LEN, *udp = ip + IP4_LEN;

	memset(m, 0, sizeof(*m));
	m->family = AF_INET;
	memcpy(m->src, ip + 12, 4);
	memcpy(m->dst, ip + 16, 4);
	m->ipv4_id = (uint16_t)(ip[4] << 8 | ip[5]);
	m->ipv4_frag = (uint16_t)(ip[6] << 8 | ip[7]);
	m->sport = (uint16_t)(udp[0] << 8 | udp[1]);
	m->dport = (uint16_t)(udp[2] << 8 | udp[3]);
}

/* An Ethernet/IPv4/UDP frame around a CNP we build, TOS = DSCP 48 +
 * ECT(0) as mlx5 sends CNPs (cnp_dscp 48). */
static size_t own_frame(uint8_t *f, const char *src, const char *dst, uint16_t sport,
			uint32_t dqpn)
{
	static const uint8_t macs[12] = { 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1 };
	uint8_t *ip = f + ETH_LEN, *udp = ip + IP4_LEN;
	struct srn_ip_meta m;
	uint16_t c;

	memset(f, 0, ETH_LEN + IP4_LEN + UDP_LEN + SRN_CNP_LEN);
	memcpy(f, macs, 12);
	f[12] = 0x08;
	ip[0] = 0x45;
	ip[1] = 48 << 2 | SRN_ECN_ECT0;
	ip[3] = IP4_LEN + UDP_LEN + SRN_CNP_LEN;
	ip[6] = 0x40;	/* DF, ID 0: what a softrnic socket sends */
	ip[8] = 64;
	ip[9] = 17;
	inet_pton(AF_INET, src, ip + 12);
	inet_pton(AF_INET, dst, ip + 16);
	c = ip_csum(ip, IP4_LEN);
	ip[10] = (uint8_t)(c >> 8);
	ip[11] = (uint8_t)c;
	udp[0] = (uint8_t)(sport >> 8);
	udp[1] = (uint8_t)sport;
	udp[2] = SRN_ROCE_PORT >> 8;
	udp[3] = SRN_ROCE_PORT & 0xff;
	udp[5] = UDP_LEN + SRN_CNP_LEN;
	meta_of(f, &m);
	srn_cnp_build(udp + UDP_LEN, dqpn, SRN_DEFAULT_PKEY, &m);
	return ETH_LEN + IP4_LEN + UDP_LEN + SRN_CNP_LEN;
}

static int write_pcap(const char *path, const uint8_t *e1, size_t e1_len)
{
	uint8_t f[2][128];
	size_t len[2];
	FILE *out = fopen(path, "wb");
	/* Classic pcap, microseconds, Ethernet. */
	const uint32_t gh[6] = { 0xa1b2c3d4, 2 | 4u << 16, 0, 0, 65535, 1 };

	if (!out)
		return -errno;
	len[0] = own_frame(f[0], "10.0.0.1", "10.0.0.2", 0xc123, 0xabcdef);
	len[1] = own_frame(f[1], "10.77.0.2", "10.77.0.1", 0xd001, 0x000042);
	fwrite(gh, sizeof(gh), 1, out);
	for (int i = 0; i < 3; i++) {
		const uint8_t *d = i == 0 ? e1 : f[i - 1];
		uint32_t n = (uint32_t)(i == 0 ? e1_len : len[i - 1]);
		uint32_t rh[4] = { 1700000000u + (uint32_t)i, 0, n, n };

		fwrite(rh, sizeof(rh), 1, out);
		fwrite(d, n, 1, out);
	}
	return fclose(out) ? -errno : 0;
}

int main(int argc, char **argv)
{
	const char *tsv = SRN_FRAMES_TSV;
	const char *pcap = NULL;
	uint8_t out[SRN_CNP_LEN], ip[IP4_LEN];
	struct srn_ip_meta m;
	const uint8_t *e1;
	size_t e1_len;
	uint32_t dqpn = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--pcap") && i + 1 < argc)
			pcap = argv[++i];
		else
			tsv = argv[i];
	}
	if (wt_load_vectors(tsv) < 0 || wt_vec_find("E1") < 0) {
		fprintf(stderr, "cannot load vector E1 from %s\n", tsv);
		return 1;
	}
	e1 = wt_vec_frame(wt_vec_find("E1"), &e1_len);
	CHECK(e1_len == ETH_LEN + IP4_LEN + UDP_LEN + SRN_CNP_LEN, "E1 is 74 bytes: %zu", e1_len);

	/* Build = the hardware's bytes. */
	meta_of(e1, &m);
	CHECK(srn_cnp_build(out, 0x118, 0xffff, &m) == SRN_CNP_LEN, "length");
	CHECK(!memcmp(out, e1 + 42, SRN_CNP_LEN), "byte-identical to the ConnectX CNP");
	CHECK(out[0] == 0x81 && out[4] == 0x40, "opcode 0x81, BECN");

	/* Parse. */
	CHECK(srn_cnp_parse(e1 + 42, SRN_CNP_LEN, &dqpn) == 0 && dqpn == 0x118, "parse E1");
	CHECK(srn_cnp_parse(out, SRN_CNP_LEN - 1, &dqpn) == -EBADMSG, "short");
	uint8_t longer[SRN_CNP_LEN + 4] = { 0 };
	memcpy(longer, out, SRN_CNP_LEN);
	CHECK(srn_cnp_parse(longer, sizeof(longer), &dqpn) == -EBADMSG, "a CNP with payload");
	uint8_t ack[SRN_BTH_LEN + SRN_AETH_LEN + SRN_ICRC_LEN];
	struct srn_pkt p = { .opcode = SRN_OP_RC_ACK, .dqpn = 5, .aeth_syndrome = 0x1f };
	memset(ack, 0, sizeof(ack));
	srn_pkt_build_hdr(ack, &p);
	CHECK(srn_cnp_parse(ack, sizeof(ack), &dqpn) == -EPROTO, "an ACK is not a CNP");
	/* Round trip over QPNs, masked to 24 bits. */
	for (uint32_t q = 1; q < (1u << 24); q = q * 3 + 7) {
		srn_cnp_build(out, q | 0xff000000u, 0x7fff, &m);
		CHECK(srn_cnp_parse(out, SRN_CNP_LEN, &dqpn) == 0 && dqpn == q, "qpn %#x", q);
	}

	/* ECN: E1 travels as DSCP 48 + ECT(0).  Marking sets CE, keeps the
	 * header checksum right and the ICRC (TOS is masked) unchanged. */
	memcpy(ip, e1 + ETH_LEN, IP4_LEN);
	CHECK(srn_ecn_of_ipv4(ip) == SRN_ECN_ECT0, "E1 is ECT(0)");
	CHECK(ip_csum(ip, IP4_LEN) == 0, "E1 header checksum valid");
	CHECK(srn_ecn_mark_ipv4(ip), "mark");
	CHECK(ip[1] == (0xc2 | SRN_ECN_CE) && srn_ecn_of_ipv4(ip) == SRN_ECN_CE, "CE set");
	CHECK(ip_csum(ip, IP4_LEN) == 0, "checksum still valid after marking");
	CHECK(srn_ecn_mark_ipv4(ip) && ip_csum(ip, IP4_LEN) == 0, "marking CE twice is a no-op");
	ip[1] = 0xc0;	/* Not-ECT */
	CHECK(!srn_ecn_mark_ipv4(ip) && ip[1] == 0xc0, "Not-ECT is never marked");
	/* Every TOS and a spread of checksums: the incremental fix-up
	 * equals a full recomputation. */
	for (int tos = 0; tos < 256; tos++) {
		memcpy(ip, e1 + ETH_LEN, IP4_LEN);
		ip[1] = (uint8_t)tos;
		ip[4] = (uint8_t)(tos * 7);
		ip[10] = ip[11] = 0;
		uint16_t c = ip_csum(ip, IP4_LEN);
		ip[10] = (uint8_t)(c >> 8);
		ip[11] = (uint8_t)c;
		bool marked = srn_ecn_mark_ipv4(ip);
		CHECK(marked == ((tos & 3) != 0), "tos %#x", tos);
		CHECK(ip_csum(ip, IP4_LEN) == 0, "tos %#x checksum", tos);
	}
	uint8_t ip6[40] = { 0x60 | 0xc, 0x20 };	/* traffic class 0xc2: DSCP 48, ECT(0) */
	CHECK(srn_ecn_of_ipv6(ip6) == SRN_ECN_ECT0, "IPv6 ECT(0)");
	CHECK(srn_ecn_mark_ipv6(ip6) && ip6[0] == 0x6c && ip6[1] == 0x30, "IPv6 CE: %02x%02x",
	      ip6[0], ip6[1]);

	if (pcap) {
		int err = write_pcap(pcap, e1, e1_len);
		CHECK(err == 0, "write %s: %s", pcap, strerror(-err));
	}
	return srn_check_result();
}
