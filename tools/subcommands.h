/*
 * subcommands.h - the table of `softrnic` subcommands.
 *
 * Each subcommand lives in its own file tools/cmd_<name>.c and provides
 * two functions:
 *
 *   int  srn_cmd_<name>(int argc, char *argv[]);  argv[0] is "<name>"
 *   void srn_usage_<name>(FILE *out);             full help text
 *
 * Adding a subcommand is one line in SRN_SUBCOMMANDS below plus its file;
 * softrnic.c builds the dispatch table and the `help` listing from this
 * list, so the two can never disagree.  The order here is the order
 * `softrnic help` prints.
 *
 * Exit codes are shared by all subcommands so scripts can rely on them:
 * 0 success, 1 failure, 2 usage error (bad option, unknown subcommand).
 * `run` additionally passes through the program's own status and uses the
 * shell's 126/127 when the program cannot be executed / found.
 */
#ifndef SRN_TOOLS_SUBCOMMANDS_H
#define SRN_TOOLS_SUBCOMMANDS_H

#include <stdio.h>

#define SRN_EXIT_OK 0
#define SRN_EXIT_FAIL 1
#define SRN_EXIT_USAGE 2

/* X(name, one-line summary) */
#define SRN_SUBCOMMANDS(X)                                                   \
	X(devinfo, "show devices, ports and GIDs (like ibv_devinfo)")        \
	X(run, "run a program on softrnic instead of the system libibverbs") \
	X(perf, "measure latency and bandwidth of verbs operations (perftest)") \
	X(stat, "live counters of every softrnic process (--watch, --json)") \
	X(res, "resources of every softrnic process: PDs, MRs, CQs, QPs")     \
	X(explain, "why work requests failed; what a completion status means") \
	X(switch, "an emulated switch port: rate, buffer, ECN marking, pause")

#define SRN_DECLARE_SUBCOMMAND(name, summary)        \
	int srn_cmd_##name(int argc, char *argv[]); \
	void srn_usage_##name(FILE *out);
SRN_SUBCOMMANDS(SRN_DECLARE_SUBCOMMAND)
#undef SRN_DECLARE_SUBCOMMAND

#endif /* SRN_TOOLS_SUBCOMMANDS_H */
