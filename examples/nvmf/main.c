/*
 * main.c - the softrnic-nvmf command: a table of subcommands.
 *
 *   target   serve subsystems over NVMe/RDMA and NVMe/TCP
 *   perf     drive a workload against a subsystem, verified
 *   probe    send bad input, check the statuses
 *   discover print the discovery log
 *   local-perf  the backing store's own latency (bench.sh's baseline)
 *
 * Target configuration by flags, in order: --subsys NQN opens a
 * subsystem; the --ns and --allow-host that follow belong to it.
 */
#include "perf.h"
#include "tgt.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	O_ADDR = 256, O_PORT, O_SUBSYS, O_NS, O_ALLOW, O_ALLOW_ANY, O_POLL, O_NO_RDMA, O_NO_TCP,
	O_PIDFILE, O_SRC, O_SUBNQN, O_HOSTNQN, O_NO_INCAP, O_DIGEST, O_KATO, O_OP, O_SEQ, O_BS,
	O_QD, O_QUEUES, O_SECONDS, O_SIZE, O_SPIN_US, O_NSID, O_INVALIDATE, O_CORES,
};

static const struct option opts[] = {
	{ "addr", 1, 0, O_ADDR },	    { "port", 1, 0, O_PORT },
	{ "subsys", 1, 0, O_SUBSYS },	    { "ns", 1, 0, O_NS },
	{ "allow-host", 1, 0, O_ALLOW },    { "allow-any-host", 0, 0, O_ALLOW_ANY },
	{ "poll", 0, 0, O_POLL },	    { "no-rdma", 0, 0, O_NO_RDMA },
	{ "no-tcp", 0, 0, O_NO_TCP },	    { "pidfile", 1, 0, O_PIDFILE },
	{ "src", 1, 0, O_SRC },		    { "subnqn", 1, 0, O_SUBNQN },
	{ "hostnqn", 1, 0, O_HOSTNQN },     { "no-incap", 0, 0, O_NO_INCAP },
	{ "digest", 0, 0, O_DIGEST },	    { "kato", 1, 0, O_KATO },
	{ "op", 1, 0, O_OP },		    { "seq", 0, 0, O_SEQ },
	{ "bs", 1, 0, O_BS },		    { "qd", 1, 0, O_QD },
	{ "queues", 1, 0, O_QUEUES },	    { "seconds", 1, 0, O_SECONDS },
	{ "size", 1, 0, O_SIZE },	    { "transport", 1, 0, 't' },
	{ "spin-us", 1, 0, O_SPIN_US },    { "nsid", 1, 0, O_NSID },
	{ "invalidate", 0, 0, O_INVALIDATE }, { "cores", 1, 0, O_CORES },
	{ 0, 0, 0, 0 },
};

static int usage(void)
{
	fprintf(stderr,
		"usage: softrnic-nvmf target [--addr A] [--port 4420] [--poll] [--no-rdma|--no-tcp]\n"
		"                      [--cores LIST (one pinned I/O thread per core: 0,1 or 0-3,\n"
		"                       or SPDK's [0,1] or 0x3; default one thread, unpinned)]\n"
		"                      (--subsys NQN (--ns FILE|ram:SIZE)... (--allow-host NQN)...\n"
		"                       [--allow-any-host])... [--pidfile F]\n"
		"       softrnic-nvmf perf -t rdma|tcp --addr A [--port P] --subnqn NQN [--hostnqn NQN]\n"
		"                      [--op read|write|rw] [--seq] [--bs 4096] [--qd 1] [--queues 1]\n"
		"                      [--seconds 2] [--size BYTES] [--no-incap] [--digest] [--src A]\n"
		"                      [--spin-us N (sleep when idle that long; default: always spin)]\n"
		"                      [--nsid N (default: the first namespace)] [--kato MS]\n"
		"                      [--invalidate (rdma: a memory window per command, invalidated\n"
		"                       by the target's Send with Invalidate; then a stale-key check)]\n"
		"       softrnic-nvmf probe    (the same connection flags as perf)\n"
		"       softrnic-nvmf discover (the same connection flags as perf)\n"
		"       softrnic-nvmf local-perf --ns FILE|ram:SIZE [--op read|write|rw] [--bs 4096]\n"
		"                      [--seconds 2] [--size BYTES]   (queue depth 1, no fabric)\n");
	return 2;
}

struct cfg {
	struct tgt_opts t;
	struct perf_opts p;
	struct nvmf_tgt *core;
	struct nvmf_subsys *cur;
	bool bad;
};

static void target_opt(struct cfg *c, int o, const char *arg)
{
	switch (o) {
	case O_SUBSYS:
		if (!(c->cur = nvmf_subsys_add(c->core, arg))) {
			fprintf(stderr, "nvmf: bad or too many subsystems (%s)\n", arg);
			c->bad = true;
		}
		return;
	case O_NS: {
		if (!c->cur || c->cur->nns >= NVMF_MAX_NS) {
			fprintf(stderr, "nvmf: --ns needs a --subsys before it (at most %d)\n",
				NVMF_MAX_NS);
			c->bad = true;
			return;
		}
		struct nvmf_ns *ns = &c->cur->ns[c->cur->nns];
		ns->nsid = c->cur->nns + 1;
		int ret = nvmf_ns_open(ns, arg);
		if (ret) {
			fprintf(stderr, "nvmf: namespace %s: %s\n", arg, strerror(-ret));
			c->bad = true;
			return;
		}
		c->cur->nns++;
		return;
	}
	case O_ALLOW:
	case O_ALLOW_ANY:
		if (!c->cur || (o == O_ALLOW && (c->cur->nallow >= NVMF_MAX_ALLOW ||
						  strlen(arg) > NVMF_NQN_LEN))) {
			fprintf(stderr, "nvmf: --allow-host needs a --subsys before it\n");
			c->bad = true;
		} else if (o == O_ALLOW_ANY) {
			c->cur->allow_any = true;
		} else {
			snprintf(c->cur->allow[c->cur->nallow++], NVMF_NQN_LEN + 1, "%s", arg);
		}
		return;
	case O_POLL: c->t.poll = true; return;
	case O_NO_RDMA: c->t.no_rdma = true; return;
	case O_NO_TCP: c->t.no_tcp = true; return;
	case O_PIDFILE: c->t.pidfile = arg; return;
	case O_CORES:
		if (tgt_parse_cores(arg, &c->t)) {
			fprintf(stderr, "nvmf: --cores %s: a list of distinct cores (at most %d), "
				"as 0,1 or 0-3 or 0x3\n", arg, NVMF_MAX_THREADS);
			c->bad = true;
		}
		return;
	default: c->bad = true; return;
	}
}

static void host_opt(struct cfg *c, int o, const char *arg)
{
	struct host_opts *h = &c->p.host;
	switch (o) {
	case 't':
		if (!strcmp(arg, "rdma"))
			h->xport = HX_RDMA;
		else if (!strcmp(arg, "tcp"))
			h->xport = HX_TCP;
		else
			c->bad = true;
		return;
	case O_SRC: h->src = arg; return;
	case O_SUBNQN: h->subnqn = arg; return;
	case O_HOSTNQN: h->hostnqn = arg; return;
	case O_NO_INCAP: h->no_incap = true; return;
	case O_DIGEST: h->digest = true; return;
	case O_KATO: h->kato = (uint32_t)strtoul(arg, NULL, 0); return;
	case O_OP:
		c->p.op = !strcmp(arg, "read") ? OP_READ : !strcmp(arg, "write") ? OP_WRITE : OP_RW;
		c->bad |= strcmp(arg, "read") && strcmp(arg, "write") && strcmp(arg, "rw");
		return;
	case O_SEQ: c->p.seq = true; return;
	case O_BS: c->p.bs = (uint32_t)strtoul(arg, NULL, 0); return;
	case O_QD: c->p.qd = (unsigned)strtoul(arg, NULL, 0); return;
	case O_QUEUES: c->p.queues = (unsigned)strtoul(arg, NULL, 0); return;
	case O_SECONDS: c->p.seconds = strtod(arg, NULL); return;
	case O_SIZE: c->p.size = strtoull(arg, NULL, 0); return;
	case O_SPIN_US: c->p.spin_us = atoi(arg); return;
	case O_NSID: h->nsid = (uint32_t)strtoul(arg, NULL, 0); return;
	case O_INVALIDATE: h->invalidate = true; return;
	default: c->bad = true; return;
	}
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	const char *cmd = argv[1];
	bool target = !strcmp(cmd, "target"), local = !strcmp(cmd, "local-perf");
	if (!target && !local && strcmp(cmd, "perf") && strcmp(cmd, "probe") &&
	    strcmp(cmd, "discover"))
		return usage();
	const char *local_ns = NULL;
	static struct tgt t;
	nvmf_tgt_init(&t.core);
	struct cfg c = { .t = { .addr = "127.0.0.1", .port = NVMF_PORT }, .core = &t.core };
	c.p = (struct perf_opts){ .op = OP_READ, .bs = 4096, .qd = 1, .queues = 1, .seconds = 2,
				  .spin_us = -1 };
	c.p.host = (struct host_opts){ .xport = HX_RDMA, .addr = "127.0.0.1", .port = NVMF_PORT,
				       .hostnqn = "nqn.2014-08.org.softrnic:host:perf",
				       .cm_qid = -1, .cm_hsqsize = -1 };
	optind = 2;
	int o;
	while ((o = getopt_long(argc, argv, "t:", opts, NULL)) != -1) {
		if (o == O_ADDR)
			c.t.addr = c.p.host.addr = optarg;
		else if (o == O_PORT)
			c.t.port = c.p.host.port = atoi(optarg);
		else if (target)
			target_opt(&c, o, optarg);
		else if (local && o == O_NS)
			local_ns = optarg;
		else
			host_opt(&c, o, optarg);
	}
	if (c.bad || optind != argc)
		return usage();
	if (target) {
		if (!t.core.nss) {
			fprintf(stderr, "nvmf: no --subsys given\n");
			return usage();
		}
		t.o = c.t;
		int ret = tgt_run(&t);
		for (unsigned i = 1; i <= t.core.nss; i++)
			for (unsigned k = 0; k < t.core.ss[i].nns; k++)
				nvmf_ns_close(&t.core.ss[i].ns[k]);
		return ret ? 1 : 0;
	}
	if (local)
		return nvmf_local_perf(&c.p, local_ns);
	host_default_ids(&c.p.host);
	if (!strcmp(cmd, "discover"))
		return nvmf_discover(&c.p.host);
	if (!c.p.host.subnqn) {
		fprintf(stderr, "nvmf: --subnqn is needed\n");
		return usage();
	}
	return !strcmp(cmd, "perf") ? nvmf_perf(&c.p) : nvmf_probe(&c.p.host);
}
