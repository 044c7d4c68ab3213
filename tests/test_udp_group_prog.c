/* Tests for link/udp_group_prog.c without a kernel: the steering program
 * of a group of every size up to 256 members, run by a small classic BPF
 * interpreter (the instructions the program uses, with the kernel's rules:
 * a load past the end returns 0, forward jumps only), must send each
 * member's packets and each CM MAD to that member's socket index, REQs
 * and unknown members past the end (the kernel's hash), and the leave
 * program must never pick the leaver's index; a probe (udp_group_priv.h)
 * goes to the index it names, and a data packet of a probe's length is
 * steered as any other.  Also checks every program
 * fits SRN_GRP_PROG_MAX and the kernel's 4096-instruction limit. */
#include <arpa/inet.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "link/udp_group.h"
#include "link/udp_group_priv.h"
#include "wire/gsi_route.h"

#define NO_INDEX 0xffffffffu

static uint32_t ld(const uint8_t *pkt, uint32_t len, uint32_t off, unsigned size, bool *out)
{
	if (off + size > len) {
		*out = true;
		return 0;
	}
	uint32_t v = 0;
	for (unsigned i = 0; i < size; i++)
		v = v << 8 | pkt[off + i];
	return v;
}

/* Run prog[0..n) on pkt: the value it returns. */
static uint32_t run(const struct sock_filter *prog, int n, const uint8_t *pkt, uint32_t len)
{
	uint32_t a = 0;
	for (int pc = 0, steps = 0; pc < n && steps < 8192; pc++, steps++) {
		const struct sock_filter *f = &prog[pc];
		bool out = false;
		switch (f->code) {
		case BPF_LD | BPF_W | BPF_LEN: a = len; break;
		case BPF_LD | BPF_IMM: a = f->k; break;
		case BPF_LD | BPF_W | BPF_ABS: a = ld(pkt, len, f->k, 4, &out); break;
		case BPF_LD | BPF_H | BPF_ABS: a = ld(pkt, len, f->k, 2, &out); break;
		case BPF_LD | BPF_B | BPF_ABS: a = ld(pkt, len, f->k, 1, &out); break;
		case BPF_ALU | BPF_AND | BPF_K: a &= f->k; break;
		case BPF_ALU | BPF_RSH | BPF_K: a >>= f->k; break;
		case BPF_ALU | BPF_ADD | BPF_K: a += f->k; break;
		case BPF_ALU | BPF_MOD | BPF_K: a %= f->k; break;
		case BPF_JMP | BPF_JA: pc += (int)f->k; break;
		case BPF_JMP | BPF_JEQ | BPF_K: pc += a == f->k ? f->jt : f->jf; break;
		case BPF_JMP | BPF_JGE | BPF_K: pc += a >= f->k ? f->jt : f->jf; break;
		case BPF_RET | BPF_K: return f->k;
		case BPF_RET | BPF_A: return a;
		default:
			CHECK(false, "instruction %d: code 0x%x not known to the test", pc, f->code);
			return NO_INDEX;
		}
		if (out)
			return 0;       /* the kernel ends the program with 0 */
	}
	CHECK(false, "the program ran off its end");
	return NO_INDEX;
}

static uint32_t data_pkt(uint8_t *p, unsigned member)
{
	memset(p, 0, 64);
	uint32_t qpn = member << SRN_QPN_MEMBER_SHIFT | 0x2002;
	p[5] = (uint8_t)(qpn >> 16);
	p[6] = (uint8_t)(qpn >> 8);
	p[7] = (uint8_t)qpn;
	p[11] = 7;              /* a PSN */
	return 64;
}

static uint32_t mad_pkt(uint8_t *p, unsigned member, uint16_t attr)
{
	memset(p, 0, SRN_GSI_MAD_OFF + 260);
	p[7] = SRN_GSI_QPN;
	p[SRN_GSI_CLASS_OFF] = SRN_GSI_CLASS_CM;
	p[SRN_GSI_ATTR_OFF] = (uint8_t)(attr >> 8);
	p[SRN_GSI_ATTR_OFF + 1] = (uint8_t)attr;
	p[attr == SRN_GSI_ATTR_SIDR_REP ? SRN_GSI_SIDR_ID_OFF : SRN_GSI_RCV_ID_OFF] = (uint8_t)member;
	return SRN_GSI_MAD_OFF + 260;
}

/* A group of n members in a scrambled kernel order. */
static void check_group(unsigned n)
{
	uint8_t order[SRN_GRP_MEMBERS];
	int index_of[SRN_GRP_MEMBERS];
	for (unsigned m = 0; m < SRN_GRP_MEMBERS; m++)
		index_of[m] = -1;
	for (unsigned i = 0; i < n; i++) {
		order[i] = (uint8_t)((i * 167 + 31) % SRN_GRP_MEMBERS);   /* 167 is odd: distinct */
		index_of[order[i]] = (int)i;
	}
	struct sock_filter prog[SRN_GRP_PROG_MAX];
	int len = srn_udp_group_prog(order, n, prog);
	CHECK(len > 0 && len <= (int)SRN_GRP_PROG_MAX && len <= BPF_MAXINSNS, "n=%u: %d instructions", n,
	      len);
	uint8_t p[SRN_GSI_MAD_OFF + 260];
	int bad = 0;
	for (unsigned m = 0; m < SRN_GRP_MEMBERS; m++) {
		uint32_t want = index_of[m] >= 0 ? (uint32_t)index_of[m] : NO_INDEX;
		uint32_t plen = data_pkt(p, m);
		bad += run(prog, len, p, plen) != want;
		bad += run(prog, len, p, mad_pkt(p, m, 0x0013)) != want;           /* REP */
		bad += run(prog, len, p, mad_pkt(p, m, SRN_GSI_ATTR_SIDR_REP)) != want;
	}
	/* A request goes by hash: the member that gets it routes it. */
	bad += run(prog, len, p, mad_pkt(p, 0, SRN_GSI_ATTR_REQ)) != NO_INDEX;
	bad += run(prog, len, p, mad_pkt(p, 0, SRN_GSI_ATTR_SIDR_REQ)) != NO_INDEX;
	/* An empty doorbell is member 0's. */
	uint32_t want0 = index_of[0] >= 0 ? (uint32_t)index_of[0] : NO_INDEX;
	bad += run(prog, len, p, 0) != want0;
	CHECK(!bad, "n=%u: %d packets steered wrong", n, bad);

	/* Probes: to the index they name, whatever the group's size (the
	 * kernel hashes one past the end); a packet of their length that is
	 * no probe is steered by its QPN. */
	struct grp_probe_pkt pr = { .word = htonl(PROBE_WORD), .prober = 3 };
	for (unsigned i = 0; i < SRN_GRP_MEMBERS; i++) {
		pr.index = (uint8_t)i;
		memcpy(p, &pr, sizeof(pr));
		bad += run(prog, len, p, PROBE_LEN) != i;
	}
	for (unsigned m = 0; m < SRN_GRP_MEMBERS; m += 37) {
		data_pkt(p, m);
		uint32_t want = index_of[m] >= 0 ? (uint32_t)index_of[m] : NO_INDEX;
		bad += run(prog, len, p, PROBE_LEN) != want;
	}
	CHECK(!bad, "n=%u: %d probes steered wrong", n, bad);

	/* Leaving from each of a few indices: never to the leaver. */
	for (unsigned self = 0; n >= 2 && self < n; self += n / 3 + 1) {
		int ll = srn_udp_group_prog_leave(order, n, self, true, prog);
		CHECK(ll > 0 && ll <= (int)SRN_GRP_PROG_MAX, "leave n=%u: %d instructions", n, ll);
		int to_self = 0;
		for (unsigned m = 0; m < SRN_GRP_MEMBERS; m++) {
			to_self += run(prog, ll, p, data_pkt(p, m)) == self;
			to_self += run(prog, ll, p, mad_pkt(p, m, 0x0013)) == self;
		}
		to_self += run(prog, ll, p, mad_pkt(p, 0, SRN_GSI_ATTR_REQ)) == self;
		CHECK(!to_self, "leave n=%u self=%u: %d packets to the leaver", n, self, to_self);
	}
}

int main(void)
{
	unsigned sizes[] = { 1, 2, 3, 4, 5, 7, 16, 17, 64, 100, 255, 256 };
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		check_group(sizes[i]);
	printf("steering programs for groups of 1..256 members: every packet to its member\n");
	return srn_check_failures ? 1 : 0;
}
