/* Parser of the SOFTRNIC_FAULTS value (syntax in fault.h).
 *
 * Invariants: the input is never modified; on success every threshold is
 * in 0..SRN_FAULT_ALWAYS, delay_us <= SRN_FAULT_MAX_DELAY_US, QP numbers
 * fit in 24 bits; on failure err names the item and what was expected.
 * Numbers are parsed by hand, not with strtod, because a program that
 * called setlocale() may use ',' as its decimal point, and ',' is our
 * separator.
 */
#include "link/fault.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define MAX_FRAC_DIGITS 6    /* 0.000001 %: finer than 2000-packet tests can see anyway */

static const char *const kind_names[SRN_FAULT_NKINDS] = {
	[SRN_FAULT_DROP] = "drop",
	[SRN_FAULT_CORRUPT] = "corrupt",
	[SRN_FAULT_DELAY] = "delay",
	[SRN_FAULT_REORDER] = "reorder",
	[SRN_FAULT_DUP] = "dup",
};

struct item {
	const char *s;   /* whole item, for messages */
	int len;
};

static bool span_is(const char *p, size_t n, const char *word)
{
	return strlen(word) == n && !memcmp(p, word, n);
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int hexval(char c)
{
	if (is_digit(c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decimal, or hex with 0x. No octal: "seed=010" means ten. */
static bool parse_uint(const char *p, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	int base = 10;
	if (n > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		p += 2;
		n -= 2;
	}
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		int d = base == 16 ? hexval(p[i]) : (is_digit(p[i]) ? p[i] - '0' : -1);
		if (d < 0 || v > (max - (uint64_t)d) / (uint64_t)base)
			return false;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	*out = v;
	return true;
}

/* "5", "0.5", "100", "12.25" -> threshold = pct / 100 * 2^53, exactly
 * rounded down; 100 gives SRN_FAULT_ALWAYS. */
static bool parse_pct(const char *p, size_t n, uint64_t *threshold)
{
	uint64_t num = 0, scale = 1;
	size_t i = 0;
	int intdigits = 0, fracdigits = 0;
	for (; i < n && is_digit(p[i]); i++, intdigits++) {
		if (intdigits >= 3)
			return false;
		num = num * 10 + (uint64_t)(p[i] - '0');
	}
	if (i < n && p[i] == '.') {
		for (i++; i < n && is_digit(p[i]); i++, fracdigits++) {
			if (fracdigits >= MAX_FRAC_DIGITS)
				return false;
			num = num * 10 + (uint64_t)(p[i] - '0');
			scale *= 10;
		}
		if (fracdigits == 0)
			return false;
	}
	if (i != n || intdigits == 0 || num > 100 * scale)
		return false;
	*threshold = (uint64_t)(((unsigned __int128)num << 53) / (100 * scale));
	return true;
}

static int fail(char *err, size_t errlen, struct item it, const char *what)
{
	snprintf(err, errlen, "%s: \"%.*s\": %s", SRN_FAULT_ENV, it.len, it.s, what);
	return -EINVAL;
}

/* "a|b|c": each element through parse_uint(max); calls add() per value. */
static int parse_list(const char *p, size_t n, uint64_t max, struct srn_fault_rule *r,
					  bool is_qp, struct item it, char *err, size_t errlen)
{
	const char *end = p + n;
	while (true) {
		const char *bar = memchr(p, '|', (size_t)(end - p));
		size_t len = bar ? (size_t)(bar - p) : (size_t)(end - p);
		uint64_t v;
		if (!parse_uint(p, len, max, &v))
			return fail(err, errlen, it,
						is_qp ? "expected QP numbers up to 0xffffff separated by '|' (qp=0x12|0x13)"
							  : "expected opcodes 0..0xff separated by '|' (opcode=0x04|0x11)");
		if (is_qp) {
			if (r->nqps == SRN_FAULT_MAX_QPS)
				return fail(err, errlen, it, "too many QP numbers (at most 16 per direction)");
			r->qps[r->nqps++] = (uint32_t)v;
		} else {
			r->by_opcode = true;
			r->opcodes[v >> 6] |= 1ull << (v & 63);
		}
		if (!bar)
			return 0;
		p = bar + 1;
	}
}

static int kind_of(const char *k, size_t n)
{
	for (int i = 0; i < SRN_FAULT_NKINDS; i++)
		if (span_is(k, n, kind_names[i]))
			return i;
	return -1;
}

static int parse_item(struct item it, struct srn_fault_cfg *cfg, char *err, size_t errlen)
{
	const char *eq = memchr(it.s, '=', (size_t)it.len);
	if (!eq)
		return fail(err, errlen, it, "expected key=value");
	const char *key = it.s, *val = eq + 1;
	size_t klen = (size_t)(eq - it.s), vlen = (size_t)(it.s + it.len - val);
	bool dir[SRN_FAULT_NDIRS] = { true, true };
	bool prefixed = false;
	if (klen > 3 && (!memcmp(key, "tx.", 3) || !memcmp(key, "rx.", 3))) {
		dir[key[0] == 't' ? SRN_FAULT_RX : SRN_FAULT_TX] = false;
		prefixed = true;
		key += 3;
		klen -= 3;
	}
	if (span_is(key, klen, "seed")) {
		if (prefixed)
			return fail(err, errlen, it, "seed applies to both directions; drop the tx./rx. prefix");
		if (!parse_uint(val, vlen, UINT64_MAX, &cfg->seed))
			return fail(err, errlen, it, "expected a whole number (seed=42)");
		return 0;
	}
	for (int d = 0; d < SRN_FAULT_NDIRS; d++) {
		if (!dir[d])
			continue;
		struct srn_fault_rule *r = &cfg->dir[d];
		int kind = kind_of(key, klen);
		uint64_t v;
		if (kind >= 0) {
			if (!parse_pct(val, vlen, &r->threshold[kind]))
				return fail(err, errlen, it,
							"expected a percentage from 0 to 100 (drop=5, drop=0.5)");
		} else if (span_is(key, klen, "delay_us")) {
			if (!parse_uint(val, vlen, SRN_FAULT_MAX_DELAY_US, &v))
				return fail(err, errlen, it,
							"expected microseconds from 0 to 10000000 (delay_us=1000)");
			r->delay_us = (uint32_t)v;
		} else if (span_is(key, klen, "opcode")) {
			int rc = parse_list(val, vlen, 0xff, r, false, it, err, errlen);
			if (rc)
				return rc;
		} else if (span_is(key, klen, "qp")) {
			int rc = parse_list(val, vlen, 0xffffff, r, true, it, err, errlen);
			if (rc)
				return rc;
		} else {
			return fail(err, errlen, it,
						"unknown key (expected seed, drop, dup, reorder, delay, delay_us, "
						"corrupt, opcode or qp, optionally prefixed by tx. or rx.)");
		}
	}
	return 0;
}

int srn_fault_parse(const char *spec, struct srn_fault_cfg *cfg, char *err, size_t errlen)
{
	char dummy[1];
	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	memset(cfg, 0, sizeof(*cfg));
	cfg->seed = 1;
	for (int d = 0; d < SRN_FAULT_NDIRS; d++)
		cfg->dir[d].delay_us = SRN_FAULT_DEFAULT_DELAY_US;
	const char *p = spec;
	while (*p) {
		const char *comma = strchr(p, ',');
		const char *end = comma ? comma : p + strlen(p);
		const char *b = p, *e = end;
		while (b < e && (*b == ' ' || *b == '\t'))
			b++;
		while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (e > b) {
			struct item it = { b, (int)(e - b) };
			int rc = parse_item(it, cfg, err, errlen);
			if (rc)
				return rc;
		}
		if (!comma)
			break;
		p = comma + 1;
	}
	return 0;
}
