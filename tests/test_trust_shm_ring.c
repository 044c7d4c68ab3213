/*
 * test_trust_shm_ring.c - a same-user sender that lies about its ring
 * index cannot make the reader touch memory past its mapping (issue 10,
 * item 9).
 *
 * The reader once skipped a bad record by jumping to the producer's
 * index, unaligned; the next record header was then read where the
 * producer said, 4 bytes short of the ring's end, and its `kind` word
 * came from past the end.  For the last slot's ring that is past the
 * mapping.  Here one receiver R and 16 senders live in one process (the
 * 16th sender claims slot 15, whose ring ends the mapping); a PROT_NONE
 * page is placed right after R's mapping so such a read faults; the last
 * sender publishes rb - 4, then rb + 60; R polls.  Then a record from
 * the first sender must still arrive intact.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "link/shm.h"
#include "wire/ecn.h"

#define NSEND SRN_SHM_SLOTS

static struct srn_shm R, S[NSEND];
static struct sockaddr_in raddr;

struct got {
	int n;
	uint32_t len;
	uint8_t first;
	uint8_t tos;
};

static void deliver(void *ctx, const uint8_t *data, uint32_t len, const struct sockaddr *src, uint8_t tos)
{
	struct got *g = ctx;
	(void)src;
	g->tos = tos;
	g->n++;
	g->len = len;
	g->first = len ? data[0] : 0;
}

static void no_bell(void *ctx, const struct sockaddr *dst, socklen_t len, unsigned member,
		    int bell)
{
	(void)ctx, (void)dst, (void)len, (void)member, (void)bell;
}

static struct sockaddr_in addr(unsigned sub, unsigned host, unsigned port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(0x7f4f0000u | sub << 8 | host);   /* 127.79.sub.host */
	return a;
}

/* The mapping [lo, hi) of /proc/self/maps that holds p. */
static int mapping_of(const void *p, uintptr_t *lo, uintptr_t *hi)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int found = 0;
	while (f && !found && fgets(line, sizeof(line), f))
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, lo, hi) == 2 && *lo <= (uintptr_t)p &&
		    (uintptr_t)p < *hi)
			found = 1;
	if (f)
		fclose(f);
	return found ? 0 : -1;
}

/* Open R with a PROT_NONE page right after its mapping: reserve the
 * mapping's size plus a page, give back all but the page, open R again
 * (mmap places top-down, into the hole just freed). */
static int open_receiver_guarded(void)
{
	uintptr_t lo, hi;
	for (int attempt = 0; attempt < 4; attempt++) {
		if (srn_shm_open(&R, (const struct sockaddr *)&raddr, sizeof(raddr), 0, true, -1) || !R.in)
			return -1;
		if (mapping_of(R.in, &lo, &hi))
			return -1;
		void *g = mmap((void *)hi, 4096, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (g == (void *)hi)
			return 0;
		if (g != MAP_FAILED)
			munmap(g, 4096);
		size_t len = hi - lo;
		srn_shm_close(&R);
		uint8_t *r = mmap(NULL, len + 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (r == MAP_FAILED)
			return -1;
		munmap(r, len);
		if (srn_shm_open(&R, (const struct sockaddr *)&raddr, sizeof(raddr), 0, true, -1) || !R.in)
			return -1;
		if (!mapping_of(R.in, &lo, &hi) && hi == (uintptr_t)(r + len))
			return 0;
		srn_shm_close(&R);
		munmap(r + len, 4096);
	}
	return -1;
}

static void publish_prod(struct srn_shm *s, struct srn_shm_peer *p, uint64_t prod)
{
	p->prod = prod;
	if (!p->dirty) {
		p->dirty = true;
		s->ndirty++;
	}
	srn_shm_publish(s, no_bell, NULL);
}

int main(void)
{
	setenv("SOFTRNIC_SHM_RING_KB", "128", 1);
	srand((unsigned)getpid());
	unsigned sub = 1 + (unsigned)rand() % 250, port = 20000 + (unsigned)rand() % 20000;
	raddr = addr(sub, 1, port);
	if (open_receiver_guarded()) {
		printf("SKIP: could not place a guard page after the inbox mapping\n");
		return 77;
	}
	struct srn_shm_peer *p[NSEND];
	for (int i = 0; i < NSEND; i++) {
		struct sockaddr_in a = addr(sub, 10 + (unsigned)i, port);
		srn_shm_open(&S[i], (const struct sockaddr *)&a, sizeof(a), 0, true, -1);
		p[i] = srn_shm_route(&S[i], (const struct sockaddr *)&raddr, sizeof(raddr), 0);
		if (!p[i] || p[i]->slot != (uint32_t)i) {
			printf("FAIL: sender %d did not get slot %d\n", i, i);
			return 1;
		}
	}
	struct srn_shm_peer *last = p[NSEND - 1];
	uint64_t rb = last->ring;
	struct got g = { 0, 0, 0 };

	/* An unaligned producer index over zeros: a bad record, dropped. */
	publish_prod(&S[NSEND - 1], last, last->prod + rb - 4);
	srn_shm_poll(&R, 64, deliver, &g);
	/* 64 more bytes: the reader's next header would start at rb - 4. */
	publish_prod(&S[NSEND - 1], last, last->prod + 64);
	srn_shm_poll(&R, 64, deliver, &g);
	if (g.n) {
		printf("FAIL: %d packets delivered from a lying ring\n", g.n);
		return 1;
	}
	printf("ok: unaligned header 4 bytes short of the mapping's end: not read\n");

	/* The other rings are unharmed. */
	uint8_t pkt[100];
	memset(pkt, 0xa5, sizeof(pkt));
	struct iovec v = { pkt, sizeof(pkt) };
	if (srn_shm_put(&S[0], p[0], &v, 1, sizeof(pkt), SRN_ECN_CE)) {
		printf("FAIL: put\n");
		return 1;
	}
	srn_shm_publish(&S[0], no_bell, NULL);
	srn_shm_poll(&R, 64, deliver, &g);
	if (g.n != 1 || g.len != sizeof(pkt) || g.first != 0xa5 || g.tos != SRN_ECN_CE) {
		printf("FAIL: a good record after the bad ones: %d delivered, len %u, tos 0x%x\n", g.n,
		       g.len, g.tos);
		return 1;
	}
	printf("ok: the next sender's record arrives intact, its CE mark with it\n");
	for (int i = 0; i < NSEND; i++)
		srn_shm_close(&S[i]);
	srn_shm_close(&R);
	return 0;
}
