/* cc_check.h - the check macro of the congestion-control unit tests:
 * CHECK(cond, fmt, ...) reports a failed condition with a message and
 * counts it in cc_failures; cc_result() prints the verdict and gives
 * the exit status.  Header-only. */
#ifndef SRN_TESTS_CC_CHECK_H
#define SRN_TESTS_CC_CHECK_H

#include <stdio.h>

static int cc_failures;

#define CHECK(cond, ...)                                                              \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                 \
			fputc('\n', stderr);                                          \
			cc_failures++;                                                \
		}                                                                     \
	} while (0)

static inline int cc_result(void)
{
	if (cc_failures) {
		fprintf(stderr, "%d failure(s)\n", cc_failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}

#endif
