/*
 * diag_opts.c - the getopt loop of `softrnic stat` and `softrnic res`: the
 * options they share (diag_opts.h) here, each one's own through its
 * callback, and the same messages for a bad value, a stray argument and
 * an unknown option.
 */
#include <string.h>

#include "diag_opts.h"
#include "subcommands.h"

/* Takes one shared option; returns 0, or -1 for a bad value. */
static int shared_opt(const struct srn_diag_cmd *cmd, struct srn_diag_opts *o, int c)
{
	switch (c) {
	case 'p':
		return srn_parse_pid(optarg, &o->filt.pid) ? -1 : 0;
	case 'd':
		o->filt.dev = optarg;
		return 0;
	case 'q':
		o->has_qp = true;
		if (cmd->qp_all_ok && !strcmp(optarg, "all")) {
			o->qp_all = true;
			return 0;
		}
		return srn_parse_u32(optarg, &o->qpn) || o->qpn > 0xffffff ? -1 : 0;
	case 'j':
		o->mode = SRN_OUT_JSON;
		return 0;
	default:   /* 'D' */
		o->mode = SRN_OUT_DUMP;
		return 0;
	}
}

int srn_diag_opts_parse(const struct srn_diag_cmd *cmd, int argc, char *argv[],
			struct srn_diag_opts *o)
{
	*o = (struct srn_diag_opts){ .mode = SRN_OUT_TABLE };
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", cmd->longopts, NULL)) != -1) {
		int r;
		switch (c) {
		case 'h':
			cmd->usage(stdout);
			return SRN_EXIT_OK;
		case '?':
			cmd->usage(stderr);
			return SRN_EXIT_USAGE;
		case 'p':
		case 'd':
		case 'q':
		case 'j':
		case 'D':
			r = shared_opt(cmd, o, c);
			break;
		default:
			r = cmd->own_opt(cmd->ctx, c, argc, argv);
			break;
		}
		if (r) {
			fprintf(stderr, "softrnic %s: bad value '%s'\n", cmd->name,
				optarg ? optarg : "");
			cmd->usage(stderr);
			return SRN_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "softrnic %s: unexpected argument '%s'\n", cmd->name, argv[optind]);
		return SRN_EXIT_USAGE;
	}
	return SRN_DIAG_OPTS_GO;
}
