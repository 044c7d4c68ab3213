/* Tests for link/config.c: SOFTRNIC_DEVICES and SOFTRNIC_CONFIG parsing, the
 * exact error message for each kind of mistake, the zero-config default,
 * interface MTU detection and the link MTU -> IB MTU rule. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "link/config.h"
#include "check.h"

static struct srn_dev_cfg devs[SRN_MAX_DEVICES];
static char err[512];

static int load_env(const char *val)
{
	unsetenv("SOFTRNIC_CONFIG");
	setenv("SOFTRNIC_DEVICES", val, 1);
	memset(devs, 0xA5, sizeof(devs));
	strcpy(err, "(untouched)");
	return srn_config_load(devs, SRN_MAX_DEVICES, err, sizeof(err));
}

static const char *v4str(const struct srn_dev_cfg *c, char *buf)
{
	inet_ntop(AF_INET, &((const struct sockaddr_in *)&c->addr)->sin_addr, buf, INET_ADDRSTRLEN);
	return buf;
}

static const char *v6str(const struct srn_dev_cfg *c, char *buf)
{
	inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&c->addr)->sin6_addr, buf, INET6_ADDRSTRLEN);
	return buf;
}

static uint32_t expected_mtu(const struct srn_dev_cfg *c)
{
	uint32_t m = 0;
	return srn_link_detect_mtu((const struct sockaddr *)&c->addr, &m) == 0 ? m : 0;
}

static uint32_t sysfs_mtu(const char *ifname)
{
	char path[128];
	snprintf(path, sizeof(path), "/sys/class/net/%s/mtu", ifname);
	FILE *f = fopen(path, "r");
	unsigned v = 0;
	if (f) {
		if (fscanf(f, "%u", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

static void test_default(void)
{
	unsetenv("SOFTRNIC_DEVICES");
	unsetenv("SOFTRNIC_CONFIG");
	int n = srn_config_load(devs, SRN_MAX_DEVICES, err, sizeof(err));
	CHECK(n == 1, "default gave %d (%s)", n, err);
	CHECK(!strcmp(devs[0].name, "softrnic0"), "name %s", devs[0].name);
	CHECK(devs[0].auto_loopback, "default must be auto_loopback");
	CHECK(devs[0].family == AF_INET, "family %d", devs[0].family);
	CHECK(devs[0].port == 4791, "port %u", devs[0].port);
	uint32_t lo = sysfs_mtu("lo");
	if (lo)
		CHECK(devs[0].link_mtu == lo, "default link_mtu %u, lo has %u", devs[0].link_mtu, lo);

	/* An empty SOFTRNIC_CONFIG counts as unset. */
	setenv("SOFTRNIC_CONFIG", "", 1);
	n = srn_config_load(devs, SRN_MAX_DEVICES, err, sizeof(err));
	CHECK(n == 1 && devs[0].auto_loopback, "empty SOFTRNIC_CONFIG: %d %s", n, err);
	unsetenv("SOFTRNIC_CONFIG");
}

static void test_valid_env(void)
{
	char a[INET6_ADDRSTRLEN];
	int n = load_env(" name=a,addr=10.0.0.1,port=4791,mtu=1500 ;addr=fd00::1;"
					 "  addr = auto , port=5000 ;addr=[fd00::7],name=v6.b-2;"
					 "addr=::ffff:10.1.2.3,mtu=9000,;");
	CHECK(n == 5, "got %d: %s", n, err);
	if (n != 5)
		return;
	CHECK(!strcmp(devs[0].name, "a"), "%s", devs[0].name);
	CHECK(devs[0].family == AF_INET && !strcmp(v4str(&devs[0], a), "10.0.0.1"), "%s", a);
	CHECK(devs[0].port == 4791 && devs[0].link_mtu == 1500 && !devs[0].auto_loopback,
		  "port %u mtu %u", devs[0].port, devs[0].link_mtu);

	CHECK(!strcmp(devs[1].name, "softrnic1"), "default name %s", devs[1].name);
	CHECK(devs[1].family == AF_INET6 && !strcmp(v6str(&devs[1], a), "fd00::1"), "%s", a);
	CHECK(devs[1].port == 4791, "%u", devs[1].port);
	CHECK(devs[1].link_mtu == expected_mtu(&devs[1]), "mtu %u", devs[1].link_mtu);

	CHECK(!strcmp(devs[2].name, "softrnic2") && devs[2].auto_loopback, "%s", devs[2].name);
	CHECK(devs[2].family == AF_INET && devs[2].port == 5000, "port %u", devs[2].port);

	CHECK(!strcmp(devs[3].name, "v6.b-2"), "%s", devs[3].name);
	CHECK(devs[3].family == AF_INET6 && !strcmp(v6str(&devs[3], a), "fd00::7"), "%s", a);

	/* IPv4-mapped becomes plain IPv4: that is the family that can send to it. */
	CHECK(devs[4].family == AF_INET && !strcmp(v4str(&devs[4], a), "10.1.2.3"), "%s", a);
	CHECK(devs[4].link_mtu == 9000, "%u", devs[4].link_mtu);

	/* Same address on different ports, and two auto devices, are fine. */
	n = load_env("addr=10.0.0.1;addr=10.0.0.1,port=4792;addr=auto;addr=auto");
	CHECK(n == 4, "got %d: %s", n, err);

	/* Numeric IPv6 scope. */
	n = load_env("addr=fe80::1%1");
	CHECK(n == 1 && ((struct sockaddr_in6 *)&devs[0].addr)->sin6_scope_id == 1, "%d %s", n, err);
}

struct bad_case {
	const char *env;
	const char *msg;     /* the full expected message */
};

static const struct bad_case bad[] = {
	{ "addr=10.0.0.1;adr=10.0.0.2",
	  "SOFTRNIC_DEVICES: entry 2: 'adr': unknown key (expected name, addr, port, mtu)" },
	{ "name=x",
	  "SOFTRNIC_DEVICES: entry 1: 'addr' is missing (give an IP address of this host, "
	  "or addr=auto for the host's loopback address)" },
	{ "addr=10.0.0.1,port=70000",
	  "SOFTRNIC_DEVICES: entry 1: port '70000': not a number in 1..65535" },
	{ "addr=10.0.0.1;addr=10.0.0.2,port=0",
	  "SOFTRNIC_DEVICES: entry 2: port '0': not a number in 1..65535" },
	{ "addr=10.0.0.1,port=-1",
	  "SOFTRNIC_DEVICES: entry 1: port '-1': not a number in 1..65535" },
	{ "addr=10.0.0.1,port=0x12b7",
	  "SOFTRNIC_DEVICES: entry 1: port '0x12b7': not a number in 1..65535" },
	{ "addr=10.0.0.1,port=",
	  "SOFTRNIC_DEVICES: entry 1: port '': not a number in 1..65535" },
	{ "addr=10.0.0.1,mtu=100",
	  "SOFTRNIC_DEVICES: entry 1: mtu '100': not a number in 576..65536" },
	{ "addr=10.0.0.1,mtu=65537",
	  "SOFTRNIC_DEVICES: entry 1: mtu '65537': not a number in 576..65536" },
	{ "addr=10.0.0.300",
	  "SOFTRNIC_DEVICES: entry 1: addr '10.0.0.300': not an IPv4 or IPv6 address (or 'auto')" },
	{ "addr=softrnic.example",
	  "SOFTRNIC_DEVICES: entry 1: addr 'softrnic.example': not an IPv4 or IPv6 address (or 'auto')" },
	{ "addr=0.0.0.0",
	  "SOFTRNIC_DEVICES: entry 1: addr '0.0.0.0': a device needs one unicast address of this "
	  "host (not the wildcard, broadcast or multicast)" },
	{ "addr=224.0.0.1",
	  "SOFTRNIC_DEVICES: entry 1: addr '224.0.0.1': a device needs one unicast address of this "
	  "host (not the wildcard, broadcast or multicast)" },
	{ "addr=::",
	  "SOFTRNIC_DEVICES: entry 1: addr '::': a device needs one unicast address of this host "
	  "(not the wildcard or multicast)" },
	{ "addr=fe80::1",
	  "SOFTRNIC_DEVICES: entry 1: addr 'fe80::1': a link-local address needs its interface, "
	  "e.g. fe80::1%eth0" },
	{ "addr=fe80::1%nosuchif0",
	  "SOFTRNIC_DEVICES: entry 1: addr 'fe80::1%nosuchif0': no interface named 'nosuchif0' in "
	  "this network namespace" },
	{ "addr=10.0.0.1%eth0",
	  "SOFTRNIC_DEVICES: entry 1: addr '10.0.0.1%eth0': an IPv4 address takes no %scope" },
	{ "addr=[fd00::1",
	  "SOFTRNIC_DEVICES: entry 1: addr '[fd00::1': unbalanced '['" },
	{ "addr=10.0.0.1,addr=10.0.0.2",
	  "SOFTRNIC_DEVICES: entry 1: 'addr' given twice" },
	{ "addr=10.0.0.1,name=bad name",
	  "SOFTRNIC_DEVICES: entry 1: name 'bad name': only letters, digits, '.', '_' and '-' are allowed" },
	{ "addr=10.0.0.1,name=",
	  "SOFTRNIC_DEVICES: entry 1: name '': must be 1..63 characters" },
	{ "addr=10.0.0.1,portx",
	  "SOFTRNIC_DEVICES: entry 1: 'portx': expected key=value" },
	{ "addr=10.0.0.1;;addr=10.0.0.1",
	  "SOFTRNIC_DEVICES: entry 3: address and port are already used by entry 1" },
	{ "addr=fd00::1;addr=[fd00::1],port=4791",
	  "SOFTRNIC_DEVICES: entry 2: address and port are already used by entry 1" },
	{ "name=a,addr=auto;name=a,addr=auto",
	  "SOFTRNIC_DEVICES: entry 2: name 'a' is already used by entry 1" },
	{ "addr=10.0.0.1,name=softrnic1;addr=10.0.0.2",
	  "SOFTRNIC_DEVICES: entry 2: name 'softrnic1' is already used by entry 1" },
	{ "addr=auto;addr=auto;addr=auto;addr=auto;addr=auto;addr=auto;addr=auto;addr=auto;addr=auto",
	  "SOFTRNIC_DEVICES: entry 9: too many devices (at most 8)" },
	{ "",
	  "SOFTRNIC_DEVICES: no device entries (unset SOFTRNIC_DEVICES to get the default loopback device)" },
	{ " ; ;",
	  "SOFTRNIC_DEVICES: no device entries (unset SOFTRNIC_DEVICES to get the default loopback device)" },
};

static void test_bad_env(void)
{
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int n = load_env(bad[i].env);
		CHECK(n == -EINVAL, "'%s' gave %d", bad[i].env, n);
		CHECK(!strcmp(err, bad[i].msg), "'%s':\n   got: %s\n  want: %s", bad[i].env, err, bad[i].msg);
	}

	/* A name of exactly 63 characters fits, 64 does not. */
	char env[200];
	snprintf(env, sizeof(env), "addr=auto,name=%063d", 7);
	CHECK(load_env(env) == 1 && strlen(devs[0].name) == 63, "%s", err);
	snprintf(env, sizeof(env), "addr=auto,name=%064d", 7);
	CHECK(load_env(env) == -EINVAL && strstr(err, "must be 1..63 characters"), "%s", err);

	/* An over-long entry is refused, not truncated. */
	char big[1200];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memcpy(big, "addr=auto,name=", 15);
	CHECK(load_env(big) == -EINVAL &&
		  !strcmp(err, "SOFTRNIC_DEVICES: entry 1: entry longer than 1023 characters"), "%s", err);

	/* The caller's max is honoured. */
	unsetenv("SOFTRNIC_CONFIG");
	setenv("SOFTRNIC_DEVICES", "addr=auto;addr=auto;addr=auto", 1);
	int n = srn_config_load(devs, 2, err, sizeof(err));
	CHECK(n == -EINVAL && !strcmp(err, "SOFTRNIC_DEVICES: entry 3: too many devices (at most 2)"),
		  "%d %s", n, err);

	/* A tiny error buffer truncates, never overflows. */
	char small[8];
	n = srn_config_load(devs, 2, small, sizeof(small));
	CHECK(n == -EINVAL && strlen(small) == 7, "%d '%s'", n, small);
}

static char tmpdir[] = "/tmp/srn_link_cfg_XXXXXX";

static const char *write_file(const char *name, const char *text)
{
	static char path[256];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL, "cannot create %s", path);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
	return path;
}

static int load_file(const char *path)
{
	unsetenv("SOFTRNIC_DEVICES");
	setenv("SOFTRNIC_CONFIG", path, 1);
	memset(devs, 0xA5, sizeof(devs));
	return srn_config_load(devs, SRN_MAX_DEVICES, err, sizeof(err));
}

static void test_file(void)
{
	if (!mkdtemp(tmpdir)) {
		CHECK(0, "mkdtemp: %s", strerror(errno));
		return;
	}
	char want[512];
	const char *p = write_file("good.conf",
							   "# softrnic devices\n"
							   "\n"
							   "name=eth,addr=192.0.2.99,mtu=1500   # lab link\n"
							   "   \t\n"
							   "addr=auto,port=4800\n"
							   "addr=fd00::99");   /* no final newline */
	int n = load_file(p);
	CHECK(n == 3, "got %d: %s", n, err);
	if (n == 3) {
		CHECK(!strcmp(devs[0].name, "eth") && devs[0].link_mtu == 1500, "%s", devs[0].name);
		CHECK(!strcmp(devs[1].name, "softrnic1") && devs[1].auto_loopback && devs[1].port == 4800,
			  "%s %u", devs[1].name, devs[1].port);
		CHECK(!strcmp(devs[2].name, "softrnic2") && devs[2].family == AF_INET6, "%s", devs[2].name);
	}

	/* SOFTRNIC_DEVICES wins over SOFTRNIC_CONFIG. */
	setenv("SOFTRNIC_DEVICES", "name=fromenv,addr=auto", 1);
	n = srn_config_load(devs, SRN_MAX_DEVICES, err, sizeof(err));
	CHECK(n == 1 && !strcmp(devs[0].name, "fromenv"), "%d %s", n, err);

	p = write_file("bad.conf", "# line 1\naddr=auto\n\naddr=10.0.0.1,adr=x # oops\n");
	n = load_file(p);
	snprintf(want, sizeof(want), "%s: line 4: 'adr': unknown key (expected name, addr, port, mtu)", p);
	CHECK(n == -EINVAL && !strcmp(err, want), "%d\n   got: %s\n  want: %s", n, err, want);

	p = write_file("dup.conf", "name=x,addr=auto\n#\nname=x,addr=auto\n");
	n = load_file(p);
	snprintf(want, sizeof(want), "%s: line 3: name 'x' is already used by line 1", p);
	CHECK(n == -EINVAL && !strcmp(err, want), "%d\n   got: %s\n  want: %s", n, err, want);

	p = write_file("empty.conf", "# nothing here\n\n");
	n = load_file(p);
	snprintf(want, sizeof(want), "%s: no device entries (unset SOFTRNIC_CONFIG to get the default "
			 "loopback device)", p);
	CHECK(n == -EINVAL && !strcmp(err, want), "%d\n   got: %s\n  want: %s", n, err, want);

	char longline[1300];
	memset(longline, ' ', sizeof(longline));
	memcpy(longline, "addr=auto", 9);
	strcpy(longline + sizeof(longline) - 2, "\n");
	p = write_file("long.conf", longline);
	n = load_file(p);
	snprintf(want, sizeof(want), "%s: line 1: line longer than 1023 characters", p);
	CHECK(n == -EINVAL && !strcmp(err, want), "%d\n   got: %s\n  want: %s", n, err, want);

	char missing[300];
	snprintf(missing, sizeof(missing), "%s/missing.conf", tmpdir);
	n = load_file(missing);
	snprintf(want, sizeof(want), "SOFTRNIC_CONFIG: cannot open '%s': No such file or directory", missing);
	CHECK(n == -ENOENT && !strcmp(err, want), "%d\n   got: %s\n  want: %s", n, err, want);

	const char *names[] = { "good.conf", "bad.conf", "dup.conf", "empty.conf", "long.conf" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char path[300];
		snprintf(path, sizeof(path), "%s/%s", tmpdir, names[i]);
		unlink(path);
	}
	rmdir(tmpdir);
	unsetenv("SOFTRNIC_CONFIG");
}

static void test_ib_mtu(void)
{
	static const struct { uint32_t link; int ib; } t[] = {
		{ 1500, IBV_MTU_1024 }, { 9000, IBV_MTU_4096 }, { 65536, IBV_MTU_4096 },
		{ 576, IBV_MTU_256 },   { 0, IBV_MTU_256 },     { 80, IBV_MTU_256 },
		{ 591, IBV_MTU_256 },   { 592, IBV_MTU_512 },   { 1100, IBV_MTU_512 },
		{ 1104, IBV_MTU_1024 }, { 2127, IBV_MTU_1024 }, { 2128, IBV_MTU_2048 },
		{ 4175, IBV_MTU_2048 }, { 4176, IBV_MTU_4096 }, { 1400, IBV_MTU_1024 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		CHECK(srn_link_ib_mtu(t[i].link) == t[i].ib, "link %u -> %d, want %d", t[i].link,
			  srn_link_ib_mtu(t[i].link), t[i].ib);
	CHECK(srn_link_ib_mtu_bytes(IBV_MTU_256) == 256 && srn_link_ib_mtu_bytes(IBV_MTU_512) == 512 &&
		  srn_link_ib_mtu_bytes(IBV_MTU_1024) == 1024 && srn_link_ib_mtu_bytes(IBV_MTU_2048) == 2048 &&
		  srn_link_ib_mtu_bytes(IBV_MTU_4096) == 4096, "bytes table");
	CHECK(srn_link_ib_mtu_bytes(0) == 0 && srn_link_ib_mtu_bytes(6) == 0, "out of range");
}

static void test_detect_mtu(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	uint32_t m = 0, lo = sysfs_mtu("lo");
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	CHECK(srn_link_detect_mtu((struct sockaddr *)&sin, &m) == 0 && (!lo || m == lo), "lo %u vs %u", m, lo);
	/* Any 127/8 address is local through lo even though lo lists only .1. */
	inet_pton(AF_INET, "127.0.0.77", &sin.sin_addr);
	m = 0;
	CHECK(srn_link_detect_mtu((struct sockaddr *)&sin, &m) == 0 && (!lo || m == lo), "127.0.0.77: %u", m);
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	m = 0;
	if (srn_link_detect_mtu((struct sockaddr *)&sin6, &m) == 0)
		CHECK(!lo || m == lo, "::1: %u", m);
	/* Multicast is never an interface's own address. */
	inet_pton(AF_INET, "239.255.77.77", &sin.sin_addr);
	CHECK(srn_link_detect_mtu((struct sockaddr *)&sin, &m) == -ENODEV, "multicast found");

	/* Cross-check every non-loopback address against sysfs. */
	struct ifaddrs *list, *ifa;
	int checked = 0;
	if (getifaddrs(&list) == 0) {
		for (ifa = list; ifa; ifa = ifa->ifa_next) {
			if (!ifa->ifa_addr || (ifa->ifa_flags & IFF_LOOPBACK) ||
				(ifa->ifa_addr->sa_family != AF_INET && ifa->ifa_addr->sa_family != AF_INET6))
				continue;
			uint32_t want = sysfs_mtu(ifa->ifa_name);
			m = 0;
			int rc = srn_link_detect_mtu(ifa->ifa_addr, &m);
			CHECK(rc == 0 && (!want || m == want), "%s: rc %d mtu %u sysfs %u", ifa->ifa_name, rc, m, want);
			checked++;
		}
		freeifaddrs(list);
	}
	printf("detect_mtu: cross-checked %d interface addresses against sysfs\n", checked);
}

int main(void)
{
	test_default();
	test_valid_env();
	test_bad_env();
	test_file();
	test_ib_mtu();
	test_detect_mtu();
	unsetenv("SOFTRNIC_DEVICES");
	if (srn_check_failures) {
		fprintf(stderr, "test_link_config: %d failure(s)\n", srn_check_failures);
		return 1;
	}
	printf("test_link_config: ok\n");
	return 0;
}
