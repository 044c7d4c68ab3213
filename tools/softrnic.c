/*
 * softrnic.c - entry point of the `softrnic` tool: dispatches to a
 * subcommand from a table, and implements `help` and `--version`.
 *
 *   softrnic <subcommand> [options...]
 *   softrnic help [subcommand]
 *   softrnic --version
 *
 * The table is generated from SRN_SUBCOMMANDS in subcommands.h; each
 * subcommand receives argv starting at its own name, so it can run
 * getopt as if it were a program of its own.
 */
#include <stdio.h>
#include <string.h>

#include "subcommands.h"

/* SRN_TOOL_VERSION comes from project(softrnic VERSION ...) in
 * CMakeLists.txt, as a compile definition (tools/CMakeLists.txt). */
#ifndef SRN_TOOL_VERSION
#error "SRN_TOOL_VERSION is set by tools/CMakeLists.txt"
#endif

struct subcommand {
	const char *name;
	int (*run)(int argc, char *argv[]);
	void (*usage)(FILE *out);
	const char *summary;
};

#define SRN_TABLE_ENTRY(n, s) { #n, srn_cmd_##n, srn_usage_##n, s },
static const struct subcommand subcommands[] = {
	SRN_SUBCOMMANDS(SRN_TABLE_ENTRY)
};
#undef SRN_TABLE_ENTRY

#define N_SUBCOMMANDS (sizeof(subcommands) / sizeof(subcommands[0]))

static const struct subcommand *find_subcommand(const char *name)
{
	for (size_t i = 0; i < N_SUBCOMMANDS; i++)
		if (!strcmp(subcommands[i].name, name))
			return &subcommands[i];
	return NULL;
}

static void show_usage(FILE *out)
{
	fprintf(out, "Usage: softrnic <subcommand> [options...]\n"
		     "       softrnic help [subcommand]\n"
		     "       softrnic --version\n\n"
		     "softrnic is a user-space RDMA NIC; these subcommands "
		     "inspect and use it:\n");
	for (size_t i = 0; i < N_SUBCOMMANDS; i++)
		fprintf(out, "  %-10s %s\n", subcommands[i].name,
			subcommands[i].summary);
	fprintf(out, "  %-10s %s\n", "help", "show this list, or the help "
					     "of one subcommand");
	fprintf(out, "\nRun `softrnic help <subcommand>` for its options.\n");
}

/* `softrnic help [name]`: help goes to stdout because it was asked for. */
static int cmd_help(int argc, char *argv[])
{
	const struct subcommand *sc;

	if (argc < 2) {
		show_usage(stdout);
		return SRN_EXIT_OK;
	}
	sc = find_subcommand(argv[1]);
	if (!sc) {
		fprintf(stderr, "softrnic: no such subcommand '%s'\n\n",
			argv[1]);
		show_usage(stderr);
		return SRN_EXIT_USAGE;
	}
	sc->usage(stdout);
	return SRN_EXIT_OK;
}

int main(int argc, char *argv[])
{
	const struct subcommand *sc;
	const char *name;

	if (argc < 2) {
		show_usage(stderr);
		return SRN_EXIT_USAGE;
	}
	name = argv[1];
	if (!strcmp(name, "--version") || !strcmp(name, "version")) {
		printf("softrnic %s\n", SRN_TOOL_VERSION);
		return SRN_EXIT_OK;
	}
	if (!strcmp(name, "help") || !strcmp(name, "--help") ||
	    !strcmp(name, "-h"))
		return cmd_help(argc - 1, argv + 1);

	sc = find_subcommand(name);
	if (!sc) {
		fprintf(stderr, "softrnic: unknown subcommand '%s'\n\n", name);
		show_usage(stderr);
		return SRN_EXIT_USAGE;
	}
	return sc->run(argc - 1, argv + 1);
}
