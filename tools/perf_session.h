/*
 * perf_session.h - one `softrnic perf` session (perf_session.c): the
 * options a session runs with, and its two halves over a TCP control
 * channel.  Both return a subcommand exit status (subcommands.h).
 */
#ifndef SRN_TOOLS_PERF_SESSION_H
#define SRN_TOOLS_PERF_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perf_report.h"
#include "perf_run.h"

enum srn_perf_output { SRN_PERF_OUT_TABLE, SRN_PERF_OUT_JSON, SRN_PERF_OUT_CSV };

struct srn_perf_opts {
	struct srn_perf_params p;           /* the test (client side) */
	uint32_t sizes[SRN_PERF_MAX_ROWS];
	size_t nsizes;
	bool sizes_given;                   /* -s or --sizes, not a sweep or the default */
	uint64_t iters;                     /* per size; a cap with duration */
	double duration_s;                  /* 0: fixed counts */
	const char *port, *dev, *host, *plot;
	const char *series;                 /* client: throughput over time, TSV */
	int incast;                         /* server: serve this many clients at once */
	uint8_t ib_port;
	int gid_index;
	int timeout_s;                      /* longest wait for the peer */
	bool loopback;
	enum srn_perf_output out;
};

/* The ranges the engine relies on; checked for the command line and for a
 * client's CONFIG alike.  On false, why says what is wrong. */
bool srn_perf_params_valid(const struct srn_perf_params *p, char *why, size_t len);

/* UD carries a message in one packet, so its sizes stop at the path MTU
 * (bytes): a sweep or the default size is cut there, as perftest does for
 * UD, while a size the user gave (`given`) above it is an error.  On false,
 * why says which size. */
bool srn_perf_ud_sizes(uint32_t *sizes, size_t *nsizes, bool given, uint32_t mtu,
		       char *why, size_t len);

/* The most clients an incast server serves at once. */
#define SRN_PERF_MAX_INCAST 16

/* Connect to host:port and run every size, printing the results. */
int srn_perf_session_client(const struct srn_perf_opts *o, const char *host,
			    const char *port);
/* Accept one client on lfd (closed here) and serve it; quiet: leave the
 * talking to the client (--loopback). */
int srn_perf_session_server(const struct srn_perf_opts *o, int lfd, bool quiet);
/* Incast: accept n clients on lfd (closed here) and serve them at once,
 * one thread each over the one device of this process, so n senders in
 * other processes (or namespaces, behind a switch) converge on one
 * receiver.  Fails if any session failed. */
int srn_perf_session_server_incast(const struct srn_perf_opts *o, int lfd, int n);

#endif /* SRN_TOOLS_PERF_SESSION_H */
