/* Device configuration: parse SOFTRNIC_DEVICES / the SOFTRNIC_CONFIG file
 * into struct srn_dev_cfg, detect link MTUs, map link MTU to IB MTU.
 *
 * Parsing never modifies its input and never reads past a bounded local copy
 * (entries and lines are at most SRN_CFG_LINE_MAX bytes). Every rejection
 * produces one line that names its source ("SOFTRNIC_DEVICES: entry 2" or
 * "/etc/softrnic.conf: line 7"), the offending text, and what was expected,
 * because this is the first thing a new user gets wrong.
 */
#include "link/config.h"

#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define SRN_CFG_LINE_MAX 1024
#define SRN_CFG_FILE_MAX (64 << 10) /* SRN_MAX_DEVICES lines, with room for comments */
#define SRN_CFG_ENV "SOFTRNIC_DEVICES"
#define SRN_CFG_FILE_ENV "SOFTRNIC_CONFIG"

static int cfg_error(char *err, size_t errlen, const char *where, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int cfg_error(char *err, size_t errlen, const char *where, const char *fmt, ...)
{
	if (err && errlen) {
		int n = snprintf(err, errlen, "%s: ", where);
		if (n >= 0 && (size_t)n < errlen) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return -EINVAL;
}

/* Trim ASCII whitespace in place; returns the first non-space character. */
static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* Decimal only: "0x..." or "1e3" in a port field is far more likely a typo
 * than intent, and strtoul would silently accept leading signs. */
static int parse_uint(const char *s, unsigned long lo, unsigned long hi, unsigned long *out)
{
	if (!*s || strlen(s) > 10)
		return -EINVAL;
	for (const char *p = s; *p; p++)
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
	unsigned long v = strtoul(s, NULL, 10);
	if (v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

static bool name_ok(const char *s)
{
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '.' && *s != '_' && *s != '-')
			return false;
	return true;
}

/* Parse an address value: a.b.c.d, x:y::z, [x:y::z], fe80::1%eth0.
 * IPv4-mapped IPv6 (::ffff:a.b.c.d) is stored as plain IPv4 because that is
 * the socket family that can actually send to it. */
static int parse_addr(const char *val, struct srn_dev_cfg *cfg, const char *where,
					  char *err, size_t errlen)
{
	char buf[128];
	size_t len = strlen(val);
	if (len >= sizeof(buf))
		return cfg_error(err, errlen, where, "addr '%.40s...': too long", val);
	memcpy(buf, val, len + 1);
	char *a = buf;
	if (a[0] == '[') {
		if (len < 2 || a[len - 1] != ']')
			return cfg_error(err, errlen, where, "addr '%s': unbalanced '['", val);
		a[len - 1] = '\0';
		a++;
	}
	char *scope = strchr(a, '%');
	if (scope)
		*scope++ = '\0';

	struct in_addr a4;
	struct in6_addr a6;
	memset(&cfg->addr, 0, sizeof(cfg->addr));
	if (inet_pton(AF_INET, a, &a4) == 1) {
		if (scope)
			return cfg_error(err, errlen, where, "addr '%s': an IPv4 address takes no %%scope", val);
		if (a4.s_addr == htonl(INADDR_ANY) || IN_MULTICAST(ntohl(a4.s_addr)) ||
			a4.s_addr == htonl(INADDR_BROADCAST))
			return cfg_error(err, errlen, where,
							 "addr '%s': a device needs one unicast address of this host "
							 "(not the wildcard, broadcast or multicast)", val);
		struct sockaddr_in *sin = (struct sockaddr_in *)&cfg->addr;
		sin->sin_family = AF_INET;
		sin->sin_addr = a4;
		cfg->family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, a, &a6) == 1) {
		if (IN6_IS_ADDR_UNSPECIFIED(&a6) || IN6_IS_ADDR_MULTICAST(&a6))
			return cfg_error(err, errlen, where,
							 "addr '%s': a device needs one unicast address of this host "
							 "(not the wildcard or multicast)", val);
		if (IN6_IS_ADDR_V4MAPPED(&a6)) {
			if (scope)
				return cfg_error(err, errlen, where, "addr '%s': an IPv4 address takes no %%scope", val);
			struct sockaddr_in *sin = (struct sockaddr_in *)&cfg->addr;
			sin->sin_family = AF_INET;
			memcpy(&sin->sin_addr, &a6.s6_addr[12], 4);
			cfg->family = AF_INET;
			return 0;
		}
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&cfg->addr;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_addr = a6;
		if (scope) {
			unsigned long idx;
			if (parse_uint(scope, 1, UINT32_MAX, &idx) == 0)
				sin6->sin6_scope_id = (uint32_t)idx;
			else if ((sin6->sin6_scope_id = if_nametoindex(scope)) == 0)
				return cfg_error(err, errlen, where,
								 "addr '%s': no interface named '%s' in this network namespace",
								 val, scope);
		} else if (IN6_IS_ADDR_LINKLOCAL(&a6)) {
			return cfg_error(err, errlen, where,
							 "addr '%s': a link-local address needs its interface, e.g. %s%%eth0",
							 val, a);
		}
		cfg->family = AF_INET6;
		return 0;
	}
	return cfg_error(err, errlen, where,
					 "addr '%s': not an IPv4 or IPv6 address (or 'auto')", val);
}

/* One key's value into cfg; the key is one of those
 * srn_config_parse_entry knows. */
static int entry_value(struct srn_dev_cfg *cfg, const char *key, const char *val,
					   const char *where, char *err, size_t errlen)
{
	unsigned long v;
	if (!strcmp(key, "name")) {
		if (!*val || strlen(val) >= sizeof(cfg->name))
			return cfg_error(err, errlen, where, "name '%s': must be 1..%zu characters",
							 val, sizeof(cfg->name) - 1);
		if (!name_ok(val))
			return cfg_error(err, errlen, where,
							 "name '%s': only letters, digits, '.', '_' and '-' are allowed", val);
		strcpy(cfg->name, val);
	} else if (!strcmp(key, "addr")) {
		if (!strcmp(val, "auto")) {
			struct sockaddr_in *sin = (struct sockaddr_in *)&cfg->addr;
			memset(&cfg->addr, 0, sizeof(cfg->addr));
			sin->sin_family = AF_INET;
			sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			cfg->family = AF_INET;
			cfg->auto_loopback = true;
		} else {
			int rc = parse_addr(val, cfg, where, err, errlen);
			if (rc)
				return rc;
		}
	} else if (!strcmp(key, "share")) {
		if (strcmp(val, "0") && strcmp(val, "1"))
			return cfg_error(err, errlen, where, "share '%s': 0 or 1", val);
		cfg->exclusive = !strcmp(val, "0");
	} else if (!strcmp(key, "port")) {
		if (parse_uint(val, 1, 65535, &v))
			return cfg_error(err, errlen, where, "port '%s': not a number in 1..65535", val);
		cfg->port = (uint16_t)v;
	} else {     /* mtu */
		if (parse_uint(val, SRN_LINK_MTU_MIN, SRN_LINK_MTU_MAX, &v))
			return cfg_error(err, errlen, where, "mtu '%s': not a number in %d..%d",
							 val, SRN_LINK_MTU_MIN, SRN_LINK_MTU_MAX);
		cfg->link_mtu = (uint32_t)v;
	}
	return 0;
}

int srn_config_parse_entry(const char *entry, int index, struct srn_dev_cfg *cfg,
						   const char *where, char *err, size_t errlen)
{
	char buf[SRN_CFG_LINE_MAX];
	size_t len = strlen(entry);
	if (len >= sizeof(buf))
		return cfg_error(err, errlen, where, "entry longer than %d characters",
						 SRN_CFG_LINE_MAX - 1);
	memcpy(buf, entry, len + 1);

	memset(cfg, 0, sizeof(*cfg));
	cfg->port = SRN_ROCE_PORT;
	snprintf(cfg->name, sizeof(cfg->name), "softrnic%d", index);
	bool seen_name = false, seen_addr = false, seen_port = false, seen_mtu = false;
	bool seen_share = false;

	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		tok = trim(tok);
		if (!*tok)
			continue;               /* tolerate "a=1,,b=2" and a trailing comma */
		char *eq = strchr(tok, '=');
		if (!eq)
			return cfg_error(err, errlen, where, "'%s': expected key=value", tok);
		*eq = '\0';
		char *key = trim(tok), *val = trim(eq + 1);
		bool *seen;
		if (!strcmp(key, "name"))
			seen = &seen_name;
		else if (!strcmp(key, "addr"))
			seen = &seen_addr;
		else if (!strcmp(key, "port"))
			seen = &seen_port;
		else if (!strcmp(key, "mtu"))
			seen = &seen_mtu;
		else if (!strcmp(key, "share"))
			seen = &seen_share;
		else
			return cfg_error(err, errlen, where,
							 "'%s': unknown key (expected name, addr, port, mtu)", key);
		if (*seen)
			return cfg_error(err, errlen, where, "'%s' given twice", key);
		*seen = true;

		int rc = entry_value(cfg, key, val, where, err, errlen);
		if (rc)
			return rc;
	}
	if (!seen_addr)
		return cfg_error(err, errlen, where,
						 "'addr' is missing (give an IP address of this host, or addr=auto "
						 "for the host's loopback address)");
	return 0;
}

/* Parsing state shared by the environment and file readers. */
struct cfg_list {
	struct srn_dev_cfg *out;
	int max;
	int n;
	int pos[SRN_MAX_DEVICES];   /* entry/line number of each device, for messages */
	const char *source;         /* "SOFTRNIC_DEVICES" or the file path */
	const char *unit;           /* "entry" or "line" */
};

static int cfg_add(struct cfg_list *l, const char *text, int pos, char *err, size_t errlen)
{
	char where[512];
	snprintf(where, sizeof(where), "%s: %s %d", l->source, l->unit, pos);
	if (l->n >= l->max)
		return cfg_error(err, errlen, where, "too many devices (at most %d)", l->max);
	struct srn_dev_cfg *c = &l->out[l->n];
	int rc = srn_config_parse_entry(text, l->n, c, where, err, errlen);
	if (rc)
		return rc;
	for (int i = 0; i < l->n; i++) {
		const struct srn_dev_cfg *o = &l->out[i];
		if (!strcmp(o->name, c->name))
			return cfg_error(err, errlen, where, "name '%s' is already used by %s %d",
							 c->name, l->unit, l->pos[i]);
		/* Two auto devices each find their own address at open; two fixed
		 * devices on one address and port would fail the second bind. */
		if (!c->auto_loopback && !o->auto_loopback && o->family == c->family &&
			o->port == c->port && !memcmp(&o->addr, &c->addr, sizeof(c->addr)))
			return cfg_error(err, errlen, where, "address and port are already used by %s %d",
							 l->unit, l->pos[i]);
	}
	l->pos[l->n++] = pos;   /* n < max <= SRN_MAX_DEVICES, checked above */
	return 0;
}

/* ';'-separated entries, numbered as the user counts the ';' (strtok_r
 * would merge empty fields and shift the numbers). text is NUL-free. */
static int cfg_from_entries(struct cfg_list *l, char *text, char *err, size_t errlen)
{
	int rc = 0, pos = 0;
	for (char *p = text, *next; p && !rc; p = next) {
		next = strchr(p, ';');
		if (next)
			*next++ = '\0';
		pos++;
		char *t = trim(p);
		if (*t)
			rc = cfg_add(l, t, pos, err, errlen);
	}
	return rc;
}

/* One entry per line, '#' to the end of a line is a comment. text is
 * NUL-free and NUL-terminated; each pass consumes one line, so the loop is
 * bounded by the text's length. */
static int cfg_from_lines(struct cfg_list *l, char *text, char *err, size_t errlen)
{
	int rc = 0, lineno = 0;
	for (char *p = text, *next; p && *p && !rc; p = next) {
		lineno++;
		next = strchr(p, '\n');
		if (next)
			*next++ = '\0';
		if (strlen(p) > SRN_CFG_LINE_MAX - 1) {
			char where[512];
			snprintf(where, sizeof(where), "%s: line %d", l->source, lineno);
			return cfg_error(err, errlen, where, "line longer than %d characters",
							 SRN_CFG_LINE_MAX - 1);
		}
		char *hash = strchr(p, '#');
		if (hash)
			*hash = '\0';
		char *t = trim(p);
		if (*t)
			rc = cfg_add(l, t, lineno, err, errlen);
	}
	return rc;
}

int srn_config_parse(const char *text, size_t len, enum srn_cfg_syntax syntax, const char *source,
					 struct srn_dev_cfg *out, int max, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (max <= 0)
		return -EINVAL;
	if (max > SRN_MAX_DEVICES)
		max = SRN_MAX_DEVICES;
	bool lines = syntax == SRN_CFG_LINES;
	struct cfg_list l = { .out = out, .max = max, .source = source,
						  .unit = lines ? "line" : "entry" };
	const char *nul = memchr(text, '\0', len);
	if (nul) {
		/* Binary data (or /dev/zero) where text was expected: say where,
		 * rather than parse up to the NUL and ignore the rest. */
		int line = 1;
		for (const char *p = text; p < nul; p++)
			line += *p == '\n';
		if (lines)
			snprintf(err, errlen, "%s: line %d: a NUL byte (this is not a text file)", source, line);
		else
			snprintf(err, errlen, "%s: a NUL byte at offset %zu", source, (size_t)(nul - text));
		return -EINVAL;
	}
	char *copy = malloc(len + 1);
	if (!copy) {
		snprintf(err, errlen, "%s: out of memory", source);
		return -ENOMEM;
	}
	memcpy(copy, text, len);
	copy[len] = '\0';
	int rc = lines ? cfg_from_lines(&l, copy, err, errlen) : cfg_from_entries(&l, copy, err, errlen);
	free(copy);
	if (rc)
		return rc;
	if (l.n == 0) {
		/* An empty list is almost always a quoting mistake; a silent device-
		 * less library would leave the user staring at "No IB devices found". */
		snprintf(err, errlen, "%s: no device entries (unset %s to get the default "
				 "loopback device)", source, lines ? SRN_CFG_FILE_ENV : SRN_CFG_ENV);
		return -EINVAL;
	}
	return l.n;
}

/* Read the whole SOFTRNIC_CONFIG file into *buf. Only a regular file of at
 * most SRN_CFG_FILE_MAX bytes: /dev/zero would never end, a FIFO may never
 * answer (O_NONBLOCK makes its open and reads return at once; it is then
 * refused by fstat), a directory reads as an error. Symlinks are followed:
 * the file is only read, and whoever can put a link at the user's chosen
 * path can put a file there too. */
static int read_config_file(const char *path, char **buf, size_t *len, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: cannot open '%s': %s", SRN_CFG_FILE_ENV, path, strerror(e));
		return -e;
	}
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st)) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot stat '%s': %s", SRN_CFG_FILE_ENV, path, strerror(-rc));
	} else if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s: '%s' is not a regular file (%s)", SRN_CFG_FILE_ENV, path,
				 S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
				 : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "a socket");
	} else if (st.st_size > SRN_CFG_FILE_MAX) {
		rc = -EFBIG;
		snprintf(err, errlen, "%s: '%s' is %lld bytes; a device list is at most %d",
				 SRN_CFG_FILE_ENV, path, (long long)st.st_size, SRN_CFG_FILE_MAX);
	}
	/* One byte more than the limit, to notice a file that grew after fstat. */
	char *b = rc ? NULL : malloc(SRN_CFG_FILE_MAX + 1);
	if (!rc && !b) {
		rc = -ENOMEM;
		snprintf(err, errlen, "%s: out of memory", SRN_CFG_FILE_ENV);
	}
	size_t n = 0;
	while (!rc && n <= SRN_CFG_FILE_MAX) {
		ssize_t r = read(fd, b + n, SRN_CFG_FILE_MAX + 1 - n);
		if (r > 0) {
			n += (size_t)r;
		} else if (r == 0) {
			break;
		} else if (errno != EINTR) {
			rc = -errno;
			snprintf(err, errlen, "%s: cannot read '%s': %s", SRN_CFG_FILE_ENV, path,
					 strerror(-rc));
		}
	}
	if (!rc && n > SRN_CFG_FILE_MAX) {
		rc = -EFBIG;
		snprintf(err, errlen, "%s: '%s' is larger than %d bytes", SRN_CFG_FILE_ENV, path,
				 SRN_CFG_FILE_MAX);
	}
	close(fd);
	if (rc) {
		free(b);
		return rc;
	}
	*buf = b;
	*len = n;
	return 0;
}

int srn_config_load(struct srn_dev_cfg *out, int max, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	int n;
	const char *env = getenv(SRN_CFG_ENV);
	const char *file = getenv(SRN_CFG_FILE_ENV);
	if (env) {
		n = srn_config_parse(env, strlen(env), SRN_CFG_ENTRIES, SRN_CFG_ENV, out, max, err, errlen);
	} else if (file && *file) {
		char *buf = NULL;
		size_t len = 0;
		n = read_config_file(file, &buf, &len, err, errlen);
		if (n)
			return n;
		n = srn_config_parse(buf, len, SRN_CFG_LINES, file, out, max, err, errlen);
		free(buf);
	} else {
		static const char def[] = "name=softrnic0,addr=auto";
		n = srn_config_parse(def, sizeof(def) - 1, SRN_CFG_ENTRIES, "default", out, max, err,
							 errlen);
	}
	for (int i = 0; i < n; i++) {
		uint32_t mtu;
		if (out[i].link_mtu == 0 && srn_link_detect_mtu((struct sockaddr *)&out[i].addr, &mtu) == 0)
			out[i].link_mtu = mtu;
	}
	return n;
}

static bool addr_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == IN_LOOPBACKNET;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return false;
}

static bool addr_equal(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
			   ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
		if (memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)))
			return false;
		/* The same link-local address may exist on several interfaces. */
		return !x->sin6_scope_id || !y->sin6_scope_id || x->sin6_scope_id == y->sin6_scope_id;
	}
	return false;
}

int srn_link_ifname(const struct sockaddr *sa, char ifname[IF_NAMESIZE])
{
	struct ifaddrs *list;
	if (getifaddrs(&list))
		return -errno;
	/* 127.0.0.N other than .1 is not listed as an address of lo, yet every
	 * 127/8 address is local through it; match loopback by interface flag.
	 * Interfaces without addresses still appear (AF_PACKET entries). */
	bool loop = addr_is_loopback(sa);
	ifname[0] = '\0';
	for (struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
		if (!ifa->ifa_name || strlen(ifa->ifa_name) >= IF_NAMESIZE)
			continue;
		if (loop ? (ifa->ifa_flags & IFF_LOOPBACK) != 0
				 : (ifa->ifa_addr && addr_equal(ifa->ifa_addr, sa))) {
			strcpy(ifname, ifa->ifa_name);
			break;
		}
	}
	freeifaddrs(list);
	return ifname[0] ? 0 : -ENODEV;
}

int srn_link_detect_mtu(const struct sockaddr *sa, uint32_t *mtu)
{
	char ifname[IF_NAMESIZE];
	int ret = srn_link_ifname(sa, ifname);
	if (ret)
		return ret;

	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, ifname);
	int rc = ioctl(fd, SIOCGIFMTU, &ifr);
	int e = errno;
	close(fd);
	if (rc)
		return -e;
	if (ifr.ifr_mtu <= 0)
		return -ENODEV;
	*mtu = (uint32_t)ifr.ifr_mtu;
	return 0;
}

uint32_t srn_link_ib_mtu_bytes(int ib_mtu)
{
	if (ib_mtu < IBV_MTU_256 || ib_mtu > IBV_MTU_4096)
		return 0;
	return 256u << (ib_mtu - IBV_MTU_256);
}

int srn_link_ib_mtu(uint32_t link_mtu)
{
	uint32_t room = link_mtu > SRN_LINK_HDR_ROOM ? link_mtu - SRN_LINK_HDR_ROOM : 0;
	for (int m = IBV_MTU_4096; m > IBV_MTU_256; m--)
		if (srn_link_ib_mtu_bytes(m) <= room)
			return m;
	return IBV_MTU_256;
}
