/*
 * diag_opts.h - the options the readers of the diagnostic segments share
 * (`softrnic stat`, `softrnic res`), and the one getopt loop that parses
 * them with each subcommand's own options.
 *
 *   --pid N  --dev NAME  --qp QPN (or "all" where allowed)  --json  --dump
 *   -h, --help
 *
 * A subcommand's getopt_long table starts with SRN_DIAG_LONGOPTS, then
 * its own options, whose values must not be those taken here ('p', 'd',
 * 'q', 'j', 'D', 'h'), then the zero entry.
 */
#ifndef SRN_TOOLS_DIAG_OPTS_H
#define SRN_TOOLS_DIAG_OPTS_H

#include <getopt.h>

#include "diag_read.h"

#define SRN_DIAG_LONGOPTS                                                          \
	{ "pid", required_argument, NULL, 'p' }, { "dev", required_argument, NULL, 'd' }, \
	{ "qp", required_argument, NULL, 'q' },  { "json", no_argument, NULL, 'j' },      \
	{ "dump", no_argument, NULL, 'D' },      { "help", no_argument, NULL, 'h' }

struct srn_diag_opts {
	struct srn_seg_filter filt;     /* --pid, --dev */
	enum srn_out_mode mode;         /* --json, --dump; a table otherwise */
	bool has_qp;                    /* --qp given */
	bool qp_all;                    /* --qp all */
	uint32_t qpn;
};

struct srn_diag_cmd {
	const char *name;               /* for messages: "softrnic <name>: ..." */
	void (*usage)(FILE *out);
	bool qp_all_ok;                 /* --qp takes "all" */
	const struct option *longopts;  /* SRN_DIAG_LONGOPTS, its own, zero */
	/* Takes one of its own options (optarg and optind as getopt_long
	 * left them); returns 0, or -1 for a bad value. */
	int (*own_opt)(void *ctx, int c, int argc, char *argv[]);
	void *ctx;
};

/* srn_diag_opts_parse's "go on": anything else is the exit status. */
#define SRN_DIAG_OPTS_GO (-1)

/* Parses argv (argv[0] the subcommand's name) into *o and, through
 * cmd->own_opt, the subcommand's own options.  Returns SRN_DIAG_OPTS_GO,
 * or SRN_EXIT_OK after printing the help, or SRN_EXIT_USAGE after saying
 * what was wrong. */
int srn_diag_opts_parse(const struct srn_diag_cmd *cmd, int argc, char *argv[],
			struct srn_diag_opts *o);

#endif /* SRN_TOOLS_DIAG_OPTS_H */
