/*
 * fuzz_config.c - libFuzzer harness for the device-list parser behind
 * SOFTRNIC_DEVICES and SOFTRNIC_CONFIG (srn_config_parse, link/config.c).
 *
 * Every input is parsed twice, as a SOFTRNIC_DEVICES value (entries split
 * by ';') and as a SOFTRNIC_CONFIG file (lines, '#' comments), from a
 * buffer of exactly its length (no terminating NUL: ASan sees any read
 * past it). Besides memory safety it asserts what config.h promises: a
 * result is 1..max devices with unique, non-empty, well-formed names, a
 * non-zero port, an address of the family it claims and an MTU that is 0
 * or in range; a rejection is -EINVAL with a message naming the source.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "link/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int n, int max, const struct srn_dev_cfg *d, const char *err)
{
	if (n <= 0) {
		if (n != -EINVAL || strncmp(err, "fuzz", 4) != 0)
			abort();
		return;
	}
	if (n > max)
		abort();
	for (int i = 0; i < n; i++) {
		size_t len = strnlen(d[i].name, sizeof(d[i].name));

		if (len == 0 || len == sizeof(d[i].name) || d[i].port == 0)
			abort();
		for (size_t k = 0; k < len; k++) {
			char c = d[i].name[k];

			if (!(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') &&
			    !(c >= '0' && c <= '9') && c != '.' && c != '_' && c != '-')
				abort();
		}
		if ((d[i].family != AF_INET && d[i].family != AF_INET6) ||
		    d[i].addr.ss_family != d[i].family)
			abort();
		if (d[i].link_mtu && (d[i].link_mtu < SRN_LINK_MTU_MIN ||
				      d[i].link_mtu > SRN_LINK_MTU_MAX))
			abort();
		for (int j = 0; j < i; j++)
			if (!strcmp(d[i].name, d[j].name))
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct srn_dev_cfg devs[SRN_MAX_DEVICES];
	char err[256];
	int n;

	n = srn_config_parse((const char *)data, size, SRN_CFG_ENTRIES, "fuzz", devs,
			     SRN_MAX_DEVICES, err, sizeof(err));
	check(n, SRN_MAX_DEVICES, devs, err);
	n = srn_config_parse((const char *)data, size, SRN_CFG_LINES, "fuzz", devs, 2, err,
			     sizeof(err));
	check(n, 2, devs, err);
	return 0;
}
