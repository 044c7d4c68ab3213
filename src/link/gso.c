/*
 * gso.c - UDP GSO send and GRO receive (see gso.h).
 */
#include "link/gso.h"
#include "link/udp_ecn.h"
#include "link/udp_group.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>

#ifndef UDP_GRO
#define UDP_GRO 104
#endif

bool srn_udp_enable_gro(struct srn_udp *u)
{
	int one = 1;
	return setsockopt(u->fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) == 0;
}

int srn_gro_batch_init(struct srn_gro_batch *b)
{
	memset(b, 0, sizeof(*b));
	b->dirty = SRN_GRO_MSGS;       /* the first call builds every descriptor */
	b->bufs = malloc((size_t)SRN_GRO_MSGS * SRN_GRO_BUFSZ);
	return b->bufs ? 0 : -ENOMEM;
}

void srn_gro_batch_free(struct srn_gro_batch *b)
{
	free(b->bufs);
	b->bufs = NULL;
}

/* The segment size of a coalesced datagram, 0 if it is a single one. */
static uint16_t gro_size(struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c))
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
			int v;
			memcpy(&v, CMSG_DATA(c), sizeof(v));
			return (uint16_t)v;
		}
	return 0;
}

int srn_udp_recv_gro(struct srn_udp *u, struct srn_gro_batch *b)
{
	/* The kernel writes back only the descriptors it filled (name and
	 * control lengths, flags): rebuild those, not all of them, on a
	 * path that mostly finds the socket empty.  The batch is allocated
	 * once per device and never moves. */
	for (int i = 0; i < b->dirty; i++) {
		b->iov[i] = (struct iovec){ b->bufs + (size_t)i * SRN_GRO_BUFSZ, SRN_GRO_BUFSZ };
		b->msgs[i].msg_hdr = (struct msghdr){
			.msg_name = &b->src[i],
			.msg_namelen = sizeof(b->src[i]),
			.msg_iov = &b->iov[i],
			.msg_iovlen = 1,
			.msg_control = b->ctrl[i],
			.msg_controllen = sizeof(b->ctrl[i]),
		};
	}
	b->dirty = 0;
	b->count = 0;
	b->datagrams = 0;
	int n = recvmmsg(u->fd, b->msgs, SRN_GRO_MSGS, MSG_DONTWAIT, NULL);
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (!u->grp)
			return 0;
		n = 0;          /* a shared address: other members may have passed packets */
	}
	b->datagrams = b->dirty = n;
	for (int i = 0; i < n; i++) {
		uint8_t *p = b->iov[i].iov_base;
		uint32_t len = b->msgs[i].msg_len;
		if (b->msgs[i].msg_hdr.msg_flags & MSG_TRUNC)
			continue;       /* cannot happen with 64 KiB buffers */
		uint16_t seg = gro_size(&b->msgs[i].msg_hdr);
		uint8_t tos = srn_udp_cmsg_tos(&b->msgs[i].msg_hdr);
		if (!seg || seg >= len)
			seg = (uint16_t)(len > 0xffff ? 0xffff : len);
		for (uint32_t off = 0, k = 0; off < len && b->count < SRN_GRO_MAX_PKTS; off += seg, k++) {
			uint32_t l = len - off < seg ? len - off : seg;
			b->pkt[b->count].data = p + off;
			b->pkt[b->count].len = l;
			b->pkt[b->count].seg_index = (uint16_t)k;
			b->pkt[b->count].tos = tos;
			b->pkt[b->count].src = &b->src[i];
			b->count++;
		}
	}
	if (__builtin_expect(u->grp != NULL, 0))
		return srn_udp_group_gro(u, b);   /* other members' packets out, theirs for us in */
	return b->count;
}
