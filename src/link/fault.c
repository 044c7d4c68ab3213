/* The fault injector's engine: decisions, held packets, and the TX and RX
 * paths that apply them (semantics and syntax in fault.h).
 *
 * Invariants:
 * - Everything below runs under f->lock; f->next_ns mirrors the earliest
 *   held deadline so the progress thread can read it without the lock.
 * - Per direction, s->delayed is a FIFO whose deadlines ascend (one
 *   delay_us per direction), and s->pending is the one packet waiting to be
 *   overtaken (reorder). s->held counts both and never passes
 *   SRN_FAULT_MAX_HELD.
 * - A packet is reordered by swapping it with the next datagram of its
 *   direction that is neither dropped nor delayed; that next datagram's
 *   own reorder roll is spent on the swap, so at 100 % the sequence
 *   0 1 2 3 becomes 1 0 3 2. x_reordered counts packets actually overtaken.
 * - RX never hands out more than SRN_RX_BATCH packets: it asks the socket
 *   for few enough datagrams that duplicates and a released reorder-held
 *   packet still fit. Copies it hands out (released, duplicated) are kept
 *   on f->lent and freed at the next receive call on the socket.
 */
#include "link/fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "link/udp.h"
#include "wire/roce_hdr.h"

#define SRN_FAULT_SCRATCH 65536   /* largest UDP datagram: 65535 */
#define BTH_DESTQP_OFF 5          /* docs/wire.md §2: bytes 5-7, 24 bits */

struct held {
	struct held *next;
	uint64_t deadline;
	struct sockaddr_storage addr;   /* TX: destination; RX: source */
	socklen_t addrlen;
	bool dup;
	uint32_t len;
	uint8_t data[];
};

struct dirstate {
	struct srn_fault_rule rule;
	uint64_t rng[4];                /* xoshiro256** state */
	struct held *head, *tail;       /* delayed, deadlines ascending */
	struct held *pending;           /* reorder: waits for the next datagram */
	unsigned held;
};

struct srn_fault {
	pthread_mutex_t lock;
	struct dirstate d[SRN_FAULT_NDIRS];
	struct held *lent;              /* RX copies handed out by the last call */
	struct srn_fault_stats st;
	_Atomic uint64_t next_ns;
	uint8_t scratch[SRN_FAULT_SCRATCH];
};

/* ---- PRNG: splitmix64 expands the seed, xoshiro256** draws ------------- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(uint64_t s[4])
{
	uint64_t r = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return r;
}

/* ---- lifetime ---------------------------------------------------------- */

int srn_fault_create(const struct srn_fault_cfg *cfg, struct srn_fault **out)
{
	struct srn_fault *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	pthread_mutex_init(&f->lock, NULL);
	for (int d = 0; d < SRN_FAULT_NDIRS; d++) {
		/* Distinct streams per direction: the TX and RX decisions of one
		 * seed must not mirror each other. */
		uint64_t x = cfg->seed ^ (0x5851f42d4c957f2dull * (uint64_t)(d + 1));
		f->d[d].rule = cfg->dir[d];
		for (int i = 0; i < 4; i++)
			f->d[d].rng[i] = splitmix64(&x);
	}
	*out = f;
	return 0;
}

static void free_list(struct held *h)
{
	while (h) {
		struct held *n = h->next;
		free(h);
		h = n;
	}
}

void srn_fault_destroy(struct srn_fault *f)
{
	if (!f)
		return;
	for (int d = 0; d < SRN_FAULT_NDIRS; d++) {
		free_list(f->d[d].head);
		free(f->d[d].pending);
	}
	free_list(f->lent);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

const struct srn_fault_stats *srn_fault_stats_of(const struct srn_fault *f)
{
	return f ? &f->st : NULL;
}

uint64_t srn_fault_next_ns(const struct srn_fault *f)
{
	return atomic_load_explicit(&f->next_ns, memory_order_relaxed);
}

static void update_next(struct srn_fault *f)
{
	uint64_t best = 0;
	for (int d = 0; d < SRN_FAULT_NDIRS; d++) {
		const struct held *c[2] = { f->d[d].head, f->d[d].pending };
		for (int i = 0; i < 2; i++)
			if (c[i] && (!best || c[i]->deadline < best))
				best = c[i]->deadline;
	}
	atomic_store_explicit(&f->next_ns, best, memory_order_relaxed);
}

/* ---- decisions --------------------------------------------------------- */

static bool eligible(const struct srn_fault_rule *r, const uint8_t *hdr, size_t hdrlen)
{
	if (r->by_opcode && (hdrlen < 1 || !(r->opcodes[hdr[0] >> 6] & (1ull << (hdr[0] & 63)))))
		return false;
	if (r->nqps) {
		if (hdrlen < BTH_DESTQP_OFF + 3)
			return false;
		uint32_t qpn = (uint32_t)hdr[5] << 16 | (uint32_t)hdr[6] << 8 | hdr[7];
		for (int i = 0; i < r->nqps; i++)
			if (r->qps[i] == qpn)
				return true;
		return false;
	}
	return true;
}

/* One draw per configured kind, plus one for the bit when corrupt fires:
 * the number of draws depends only on the configuration and the rolls. */
static bool decide(struct dirstate *s, const uint8_t *hdr, size_t hdrlen,
				   struct srn_fault_decision *d)
{
	memset(d, 0, sizeof(*d));
	if (!eligible(&s->rule, hdr, hdrlen))
		return false;
	for (int k = 0; k < SRN_FAULT_NKINDS; k++)
		if (s->rule.threshold[k])
			d->fire[k] = (rng_next(s->rng) >> 11) < s->rule.threshold[k];
	if (d->fire[SRN_FAULT_CORRUPT])
		d->bit = rng_next(s->rng);
	return true;
}

bool srn_fault_decide(struct srn_fault *f, enum srn_fault_dir dir, const uint8_t *hdr,
					  size_t hdrlen, struct srn_fault_decision *d)
{
	pthread_mutex_lock(&f->lock);
	bool r = decide(&f->d[dir], hdr, hdrlen, d);
	pthread_mutex_unlock(&f->lock);
	return r;
}

/* Flip one bit after the BTH. False when there is nothing after it. */
static bool corrupt(uint8_t *p, size_t len, uint64_t bit)
{
	if (len <= SRN_BTH_LEN)
		return false;
	uint64_t pos = bit % ((uint64_t)(len - SRN_BTH_LEN) * 8);
	p[SRN_BTH_LEN + pos / 8] ^= (uint8_t)(1u << (pos % 8));
	return true;
}

/* ---- held packets ------------------------------------------------------ */

static size_t iov_total(const struct iovec *iov, int n)
{
	size_t t = 0;
	for (int i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t;
}

static size_t gather(uint8_t *dst, size_t cap, const struct iovec *iov, int n)
{
	size_t off = 0;
	for (int i = 0; i < n && off < cap; i++) {
		size_t c = iov[i].iov_len < cap - off ? iov[i].iov_len : cap - off;
		memcpy(dst + off, iov[i].iov_base, c);
		off += c;
	}
	return off;
}

static struct held *held_new(const void *addr, socklen_t addrlen, const struct iovec *iov,
							 int iovcnt, size_t len, uint64_t deadline, bool dup)
{
	struct held *h = malloc(sizeof(*h) + len);
	if (!h)
		return NULL;
	h->next = NULL;
	h->deadline = deadline;
	memset(&h->addr, 0, sizeof(h->addr));
	if (addrlen > sizeof(h->addr))
		addrlen = sizeof(h->addr);
	memcpy(&h->addr, addr, addrlen);
	h->addrlen = addrlen;
	h->dup = dup;
	h->len = (uint32_t)len;
	gather(h->data, len, iov, iovcnt);
	return h;
}

static void push(struct dirstate *s, struct held *h)
{
	if (s->tail)
		s->tail->next = h;
	else
		s->head = h;
	s->tail = h;
	s->held++;
}

static struct held *pop(struct dirstate *s)
{
	struct held *h = s->head;
	s->head = h->next;
	if (!s->head)
		s->tail = NULL;
	h->next = NULL;
	s->held--;
	return h;
}

static uint64_t deadline_of(const struct dirstate *s, uint64_t now)
{
	return now + (uint64_t)s->rule.delay_us * 1000u;
}

/* ---- TX ---------------------------------------------------------------- */

/* Send once, or twice for a duplicate; the result is the first send's. */
static int send_copies(struct srn_udp *u, struct srn_fault *f, const struct sockaddr *dst,
					   socklen_t dstlen, const struct iovec *iov, int iovcnt, bool dup)
{
	int r = srn_udp_xmit(u, dst, dstlen, iov, iovcnt);
	if (r == 0 && dup && srn_udp_xmit(u, dst, dstlen, iov, iovcnt) == 0)
		f->st.tx_duplicated++;
	return r;
}

static int send_held(struct srn_udp *u, struct srn_fault *f, struct held *h)
{
	struct iovec v = { h->data, h->len };
	return send_copies(u, f, (const struct sockaddr *)&h->addr, h->addrlen, &v, 1, h->dup);
}

/* A held packet that cannot go out for a full buffer stays held; any other
 * failure loses it, as the wire would. */
static int tx_release(struct srn_udp *u, struct srn_fault *f, uint64_t now)
{
	struct dirstate *s = &f->d[SRN_FAULT_TX];
	int n = 0;
	while (s->head && s->head->deadline <= now) {
		if (send_held(u, f, s->head) == -EAGAIN)
			break;
		free(pop(s));
		n++;
	}
	if (s->pending && s->pending->deadline <= now && send_held(u, f, s->pending) != -EAGAIN) {
		free(s->pending);
		s->pending = NULL;
		s->held--;
		n++;
	}
	return n;
}

int srn_fault_tx_flush(struct srn_udp *u, uint64_t now_ns)
{
	struct srn_fault *f = u->fault;
	pthread_mutex_lock(&f->lock);
	int n = tx_release(u, f, now_ns);
	update_next(f);
	pthread_mutex_unlock(&f->lock);
	return n;
}

static int tx_locked(struct srn_udp *u, struct srn_fault *f, const struct sockaddr *dst,
					 socklen_t dstlen, const struct iovec *iov, int iovcnt, uint64_t now)
{
	struct dirstate *s = &f->d[SRN_FAULT_TX];
	struct srn_fault_decision d;
	uint8_t hdr[SRN_BTH_LEN] = { 0 };

	tx_release(u, f, now);
	size_t len = iov_total(iov, iovcnt);
	size_t hdrlen = gather(hdr, sizeof(hdr), iov, iovcnt);
	decide(s, hdr, hdrlen, &d);
	if (d.fire[SRN_FAULT_DROP]) {
		f->st.tx_dropped++;
		return 0;
	}
	struct iovec one;
	if (d.fire[SRN_FAULT_CORRUPT] && len > SRN_BTH_LEN) {
		if (len > sizeof(f->scratch))
			return -EMSGSIZE;
		gather(f->scratch, len, iov, iovcnt);
		corrupt(f->scratch, len, d.bit);
		one = (struct iovec){ f->scratch, len };
		iov = &one;
		iovcnt = 1;
		f->st.tx_corrupted++;
	}
	bool room = s->held < SRN_FAULT_MAX_HELD;
	if (d.fire[SRN_FAULT_DELAY] && room) {
		struct held *h = held_new(dst, dstlen, iov, iovcnt, len, deadline_of(s, now),
								  d.fire[SRN_FAULT_DUP]);
		if (h) {
			push(s, h);
			f->st.tx_delayed++;
			return 0;
		}
	}
	if (s->pending) {
		int r = send_copies(u, f, dst, dstlen, iov, iovcnt, d.fire[SRN_FAULT_DUP]);
		if (r)
			return r;
		if (send_held(u, f, s->pending) != -EAGAIN) {
			free(s->pending);
			s->pending = NULL;
			s->held--;
			f->st.tx_reordered++;
		}
		return 0;
	}
	if (d.fire[SRN_FAULT_REORDER] && room) {
		s->pending = held_new(dst, dstlen, iov, iovcnt, len, deadline_of(s, now),
							  d.fire[SRN_FAULT_DUP]);
		if (s->pending) {
			s->held++;
			return 0;
		}
	}
	return send_copies(u, f, dst, dstlen, iov, iovcnt, d.fire[SRN_FAULT_DUP]);
}

int srn_fault_tx(struct srn_udp *u, const struct sockaddr *dst, socklen_t dstlen,
				 const struct iovec *iov, int iovcnt, uint64_t now_ns)
{
	struct srn_fault *f = u->fault;
	pthread_mutex_lock(&f->lock);
	int r = tx_locked(u, f, dst, dstlen, iov, iovcnt, now_ns);
	update_next(f);
	pthread_mutex_unlock(&f->lock);
	return r;
}

/* ---- RX ---------------------------------------------------------------- */

struct rx_in {
	uint8_t *data;
	uint32_t len;
	struct sockaddr_storage src;
	socklen_t srclen;
};

struct rx_out {
	struct srn_fault *f;
	struct srn_rx_batch *b;
	int n;
};

static void out_put(struct rx_out *o, uint8_t *data, uint32_t len, const void *src,
					socklen_t srclen)
{
	int i = o->n++;
	o->b->pkt[i].data = data;
	o->b->pkt[i].len = len;
	memcpy(&o->b->pkt[i].src, src, srclen);
	o->b->pkt[i].srclen = srclen;
}

/* A copy for the second delivery of a duplicate: the consumer may write
 * into a packet, so two deliveries never share a buffer. */
static void out_dup(struct rx_out *o, const uint8_t *data, uint32_t len, const void *src,
					socklen_t srclen)
{
	struct iovec v = { (void *)data, len };
	struct held *c = held_new(src, srclen, &v, 1, len, 0, false);
	if (!c)
		return;
	c->next = o->f->lent;
	o->f->lent = c;
	out_put(o, c->data, len, &c->addr, srclen);
	o->f->st.rx_duplicated++;
}

static void out_pkt(struct rx_out *o, const struct rx_in *p, bool dup)
{
	out_put(o, p->data, p->len, &p->src, p->srclen);
	if (dup)
		out_dup(o, p->data, p->len, &p->src, p->srclen);
}

/* Hand out a held packet; it lives on f->lent until the next call. */
static void out_held(struct rx_out *o, struct held *h)
{
	h->next = o->f->lent;
	o->f->lent = h;
	out_put(o, h->data, h->len, &h->addr, h->addrlen);
	if (h->dup)
		out_dup(o, h->data, h->len, &h->addr, h->addrlen);
}

static int outputs_of(const struct held *h)
{
	return h->dup ? 2 : 1;
}

static void rx_release(struct dirstate *s, struct rx_out *o, uint64_t now)
{
	while (s->head && s->head->deadline <= now && o->n + outputs_of(s->head) <= SRN_RX_BATCH)
		out_held(o, pop(s));
	if (s->pending && s->pending->deadline <= now &&
		o->n + outputs_of(s->pending) <= SRN_RX_BATCH) {
		out_held(o, s->pending);
		s->pending = NULL;
		s->held--;
	}
}

/* Apply RX faults to the r datagrams the socket just gave, in order. */
static void rx_apply(struct srn_fault *f, struct rx_out *o, int r, uint64_t now)
{
	struct dirstate *s = &f->d[SRN_FAULT_RX];
	struct rx_in in[SRN_RX_BATCH];
	int waiting = -1;              /* in-batch reorder: index into in[] */
	bool waiting_dup = false;

	/* Copy the descriptors out first: reordering writes pkt[] entries
	 * whose src fields have not been read yet. */
	for (int i = 0; i < r; i++) {
		in[i].data = o->b->pkt[o->n + i].data;
		in[i].len = o->b->pkt[o->n + i].len;
		in[i].srclen = o->b->pkt[o->n + i].srclen;
		memcpy(&in[i].src, &o->b->pkt[o->n + i].src, in[i].srclen);
	}
	for (int i = 0; i < r; i++) {
		struct rx_in *p = &in[i];
		struct srn_fault_decision d;
		decide(s, p->data, p->len < SRN_BTH_LEN ? p->len : SRN_BTH_LEN, &d);
		bool dup = d.fire[SRN_FAULT_DUP];
		if (d.fire[SRN_FAULT_DROP]) {
			f->st.rx_dropped++;
			continue;
		}
		if (d.fire[SRN_FAULT_CORRUPT] && corrupt(p->data, p->len, d.bit))
			f->st.rx_corrupted++;
		bool room = s->held < SRN_FAULT_MAX_HELD;
		if (d.fire[SRN_FAULT_DELAY] && room) {
			struct iovec v = { p->data, p->len };
			struct held *h = held_new(&p->src, p->srclen, &v, 1, p->len, deadline_of(s, now), dup);
			if (h) {
				push(s, h);
				f->st.rx_delayed++;
				continue;
			}
		}
		if (waiting >= 0 || s->pending) {
			out_pkt(o, p, dup);
			if (waiting >= 0) {
				out_pkt(o, &in[waiting], waiting_dup);
				waiting = -1;
			} else {
				out_held(o, s->pending);
				s->pending = NULL;
				s->held--;
			}
			f->st.rx_reordered++;
			continue;
		}
		if (d.fire[SRN_FAULT_REORDER]) {
			waiting = i;
			waiting_dup = dup;
			continue;
		}
		out_pkt(o, p, dup);
	}
	if (waiting >= 0) {
		struct rx_in *p = &in[waiting];
		struct iovec v = { p->data, p->len };
		if (s->held < SRN_FAULT_MAX_HELD)
			s->pending = held_new(&p->src, p->srclen, &v, 1, p->len, deadline_of(s, now),
								  waiting_dup);
		if (s->pending)
			s->held++;
		else
			out_pkt(o, p, waiting_dup);
	}
}

int srn_fault_rx(struct srn_udp *u, struct srn_rx_batch *b, int *truncated, uint64_t now_ns)
{
	struct srn_fault *f = u->fault;
	struct dirstate *s = &f->d[SRN_FAULT_RX];
	struct rx_out o = { f, b, 0 };

	if (truncated)
		*truncated = 0;
	pthread_mutex_lock(&f->lock);
	free_list(f->lent);
	f->lent = NULL;
	rx_release(s, &o, now_ns);

	/* Worst case per new datagram: itself and a duplicate; plus a
	 * reorder-held packet (and its duplicate) released behind one. */
	int room = SRN_RX_BATCH - o.n;
	bool grows = s->rule.threshold[SRN_FAULT_DUP] || s->rule.threshold[SRN_FAULT_REORDER] ||
				 s->pending;
	int want = grows ? (room - 2) / 2 : room;
	int r = want > 0 ? srn_udp_recv_into(u, b, o.n, want, truncated) : 0;
	int ret;
	if (r < 0 && o.n == 0) {
		ret = r;
	} else {
		if (r > 0)
			rx_apply(f, &o, r, now_ns);
		ret = o.n;
	}
	b->count = o.n;
	update_next(f);
	pthread_mutex_unlock(&f->lock);
	return ret;
}
