/*
 * check.h - the tests' one CHECK.
 *
 *   CHECK(cond)  or  CHECK(cond, "fmt", args...)
 *
 * A failed check prints "file:line: CHECK(cond) failed: message" on
 * stderr and counts in srn_check_failures; the test goes on, so one run
 * shows every broken property, and ends with `return srn_check_result()`
 * (exit 0, or 1 after a summary line).  Only the first SRN_CHECK_MAX_SHOWN
 * failures are printed: a broken table-driven test stays readable.
 *
 * A program that cannot go on after a failed step (two processes in
 * lock-step over a socketpair) defines SRN_CHECK_FATAL before including
 * this: CHECK then exits 1 at the first failure.  SRN_CHECK_TAG, if
 * defined, is an expression giving a string printed first ("parent",
 * "child") so the side that failed is known.
 *
 * Header only, and its state is per translation unit: count in one file.
 */
#ifndef SRN_TESTS_CHECK_H
#define SRN_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define SRN_CHECK_MAX_SHOWN 60

static int srn_check_failures;

__attribute__((format(printf, 4, 5), unused)) static void
srn_check_report(const char *file, int line, const char *cond, const char *fmt, ...)
{
	if (srn_check_failures > SRN_CHECK_MAX_SHOWN)
		return;
#ifdef SRN_CHECK_TAG
	fprintf(stderr, "[%s] ", SRN_CHECK_TAG);
#endif
	fprintf(stderr, "%s:%d: CHECK(%s) failed:", file, line, cond);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

#ifdef SRN_CHECK_FATAL
#define SRN_CHECK_AFTER_FAILURE() exit(1)
#else
#define SRN_CHECK_AFTER_FAILURE() ((void)0)
#endif

/* The message's format must be a string literal (it is glued to " "). */
#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			srn_check_failures++;                                              \
			srn_check_report(__FILE__, __LINE__, #cond, " " __VA_ARGS__);      \
			SRN_CHECK_AFTER_FAILURE();                                         \
		}                                                                          \
	} while (0)

/* main's exit status: 0, or 1 after saying how many checks failed. */
__attribute__((unused)) static int srn_check_result(void)
{
	if (!srn_check_failures)
		return 0;
	fprintf(stderr, "%d check(s) failed\n", srn_check_failures);
	return 1;
}

#endif
