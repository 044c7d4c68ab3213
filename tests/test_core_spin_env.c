/*
 * test_core_spin_env.c - SOFTRNIC_SPIN_US, how long the progress thread
 * keeps polling after socket traffic (engine/progress.c): the default, off,
 * a value, the 0.1 s ceiling, and what is not a number.
 */
#include <stdint.h>
#include <stdio.h>

#include "core/nic.h"
#include "engine/nic.h"

static int failures;

static void check(const char *env, uint64_t want)
{
	uint64_t got = srn_progress_spin_ns(env);
	if (got != want) {
		fprintf(stderr, "FAIL: SOFTRNIC_SPIN_US=%s gives %llu ns, want %llu\n",
			env ? env : "(unset)", (unsigned long long)got, (unsigned long long)want);
		failures++;
	}
}

int main(void)
{
	check(NULL, 50000);
	check("", 50000);
	check("0", 0);
	check("200", 200000);
	check("100000", 100000000);
	check("5000000000", 100000000);
	check("abc", 50000);
	check("12us", 50000);
	check("-5", 50000);
	if (!failures)
		printf("ok: SOFTRNIC_SPIN_US parsing\n");
	return failures != 0;
}
