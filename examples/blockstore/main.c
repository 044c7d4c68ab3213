/*
 * main.c - the `blockstore` command: a table of subcommands.
 *
 *   blockstore server --dev FILE --addr IP [--tcp] ...   serve a device
 *   blockstore bench  --addr IP [--tcp] --op write ...   load it, check it
 *   blockstore put    --addr IP --lba N < block          write one block
 *   blockstore get    --addr IP --lba N > block          read one block
 *   blockstore flush  --addr IP                          wait for write-back
 *   blockstore stats  --addr IP                          server CPU and I/Os
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "server.h"
#include "workload.h"

/* put, get, flush, stats: one connection, one request. */
static int one_request(int argc, char **argv, uint8_t op)
{
	static const struct option lo[] = {
		{ "addr", 1, 0, 'a' }, { "port", 1, 0, 'p' }, { "tcp", 0, 0, 't' },
		{ "lba", 1, 0, 'l' },  { "src", 1, 0, 'I' }, { 0 },
	};
	struct bs_client_opts o = { .host = "127.0.0.1", .port = 7470, .nconn = 1, .depth = 1,
				    .reconnect_ms = 5000 };
	uint64_t lba = 0;
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'a': o.host = optarg; break;
		case 'p': o.port = atoi(optarg); break;
		case 't': o.tcp = true; break;
		case 'l': lba = strtoull(optarg, NULL, 0); break;
		case 'I': o.src = optarg; break;
		default:
			fprintf(stderr, "usage: blockstore %s --addr IP [--port P] [--tcp]%s\n",
				argv[0], op == BS_OP_WRITE || op == BS_OP_READ ? " --lba N" : "");
			return 2;
		}
	}
	struct bs_client *cl;
	int ret = bs_client_open(&o, &cl);
	if (ret) {
		fprintf(stderr, "blockstore: cannot connect to %s:%d: %s\n", o.host, o.port,
			strerror(-ret));
		return 1;
	}
	struct bs_io *io = bs_client_io(cl, 0);
	io->op = op;
	io->lba = lba;
	if (op == BS_OP_WRITE) {
		size_t got = 0;
		ssize_t k;
		while (got < BS_BLOCK && (k = read(0, io->buf + got, BS_BLOCK - got)) > 0)
			got += (size_t)k;
		memset(io->buf + got, 0, BS_BLOCK - got); /* a short block is zero-padded */
	}
	ret = bs_do(cl, io, 10000);
	if (!ret && op == BS_OP_READ)
		ret = fwrite(io->buf, 1, BS_BLOCK, stdout) == BS_BLOCK ? 0 : -EIO;
	if (!ret && op == BS_OP_STATS)
		printf("stats cpu_us=%llu io_cpu_us=%llu ios=%llu remaps=%llu\n",
		       (unsigned long long)io->v[0], (unsigned long long)io->v[1],
		       (unsigned long long)io->v[2], (unsigned long long)io->v[3]);
	if (ret)
		fprintf(stderr, "blockstore %s: %s\n", argv[0], strerror(-ret));
	bs_client_close(cl);
	return ret ? 1 : 0;
}

static int cmd_put(int argc, char **argv)
{
	return one_request(argc, argv, BS_OP_WRITE);
}

static int cmd_get(int argc, char **argv)
{
	return one_request(argc, argv, BS_OP_READ);
}

static int cmd_flush(int argc, char **argv)
{
	return one_request(argc, argv, BS_OP_FLUSH);
}

static int cmd_stats(int argc, char **argv)
{
	return one_request(argc, argv, BS_OP_STATS);
}

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *what;
} cmds[] = {
	{ "server", bs_server_main, "serve a block device (RDMA, or --tcp)" },
	{ "bench", bs_bench_main, "random 4 KiB I/O, every block checked" },
	{ "put", cmd_put, "write one block from stdin" },
	{ "get", cmd_get, "read one block to stdout" },
	{ "flush", cmd_flush, "wait until every acknowledged block is on disk" },
	{ "stats", cmd_stats, "the server's CPU time and I/O count" },
};

int main(int argc, char **argv)
{
	for (size_t i = 0; argc > 1 && i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "usage: blockstore COMMAND [options]\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(stderr, "  %-7s %s\n", cmds[i].name, cmds[i].what);
	return 2;
}
