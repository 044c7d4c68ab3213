/*
 * switch_flow.c - per-flow accounting of the emulated switch
 * (switch_flow.h).  Frames come from our own veths but are still parsed
 * with every length checked: a malformed frame is "not IP", never a read
 * past the end.
 */
#include <arpa/inet.h>
#include <string.h>

#include "switch_flow.h"

#define ETH_HLEN_	14
#define VLAN_TPID	0x8100
#define ETYPE_IPV4	0x0800
#define ETYPE_IPV6	0x86dd

static uint16_t be16_at(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

int srn_swf_parse(const uint8_t *eth, uint32_t len, struct srn_swf_key *key)
{
	uint32_t off = ETH_HLEN_, l4 = 0;
	uint16_t etype;

	memset(key, 0, sizeof(*key));
	if (len < ETH_HLEN_)
		return -1;
	etype = be16_at(eth + 12);
	if (etype == VLAN_TPID) {
		if (len < ETH_HLEN_ + 4)
			return -1;
		etype = be16_at(eth + 16);
		off += 4;
	}
	if (etype == ETYPE_IPV4 && len >= off + 20 && eth[off] >> 4 == 4) {
		uint32_t ihl = (eth[off] & 0xfu) * 4u;

		if (ihl < 20 || len < off + ihl)
			return -1;
		key->family = 4;
		key->proto = eth[off + 9];
		memcpy(key->src, eth + off + 12, 4);
		memcpy(key->dst, eth + off + 16, 4);
		l4 = off + ihl;
	} else if (etype == ETYPE_IPV6 && len >= off + 40 && eth[off] >> 4 == 6) {
		key->family = 6;
		key->proto = eth[off + 6];	/* extension headers: ports stay 0 */
		memcpy(key->src, eth + off + 8, 16);
		memcpy(key->dst, eth + off + 24, 16);
		l4 = off + 40;
	} else {
		return -1;
	}
	if ((key->proto == 17 || key->proto == 6) && len >= l4 + 4) {
		key->sport = be16_at(eth + l4);
		key->dport = be16_at(eth + l4 + 2);
	}
	return (int)off;
}

int srn_swf_lookup(struct srn_swf_table *t, const struct srn_swf_key *key)
{
	for (int i = 0; i < t->n; i++)
		if (!memcmp(&t->f[i].key, key, sizeof(*key)))
			return i;
	if (t->n == SRN_SWF_MAX)
		return SRN_SWF_MAX;	/* "other" */
	memset(&t->f[t->n], 0, sizeof(t->f[0]));
	t->f[t->n].key = *key;
	return t->n++;
}

uint32_t srn_swf_hash_bytes(const uint8_t *p, size_t len)
{
	uint32_t h = 2166136261u;	/* FNV-1a offset basis and prime */

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 16777619u;
	/* Fold the high bits in: a link is chosen by h % 2, and FNV's low
	 * bit alone depends on the low bit of each byte only. */
	return h ^ (h >> 16) ^ (h >> 24);
}

uint32_t srn_swf_hash(const struct srn_swf_key *k)
{
	uint8_t b[2 + 4 + 32];
	size_t alen = k->family == 6 ? 16 : 4, n = 0;

	b[n++] = k->family;
	b[n++] = k->proto;
	b[n++] = (uint8_t)(k->sport >> 8);
	b[n++] = (uint8_t)k->sport;
	b[n++] = (uint8_t)(k->dport >> 8);
	b[n++] = (uint8_t)k->dport;
	memcpy(b + n, k->src, alen);
	n += alen;
	memcpy(b + n, k->dst, alen);
	n += alen;
	return srn_swf_hash_bytes(b, n);
}

void srn_swf_print(struct srn_swf_table *t, FILE *out, double t_s, uint64_t dt_ns,
		   const char *const *links)
{
	for (int i = 0; i <= SRN_SWF_MAX; i++) {
		struct srn_swf *f = &t->f[i];
		char s[INET6_ADDRSTRLEN] = "other", d[INET6_ADDRSTRLEN] = "other";
		double mbps;

		if (i >= t->n && i != SRN_SWF_MAX)
			continue;
		if (f->pkts == 0 && f->drops == 0)
			continue;
		if (i < SRN_SWF_MAX) {
			int af = f->key.family == 6 ? AF_INET6 : AF_INET;

			inet_ntop(af, f->key.src, s, sizeof(s));
			inet_ntop(af, f->key.dst, d, sizeof(d));
		}
		mbps = dt_ns ? (double)(f->bytes - f->bytes_reported) * 8e3 / (double)dt_ns : 0;
		f->bytes_reported = f->bytes;
		fprintf(out, "t=%.3f flow %s:%u>%s:%u proto=%u pkts=%llu bytes=%llu mbps=%.1f "
			"marks=%llu drops=%llu%s%s\n",
			t_s, s, f->key.sport, d, f->key.dport, f->key.proto,
			(unsigned long long)f->pkts, (unsigned long long)f->bytes, mbps,
			(unsigned long long)f->marks, (unsigned long long)f->drops,
			links && i < SRN_SWF_MAX ? " link=" : "",
			links && i < SRN_SWF_MAX ? links[f->link] : "");
	}
}
