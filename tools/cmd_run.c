/*
 * cmd_run.c - `softrnic run`: execute a program with softrnic standing in
 * for the system's libibverbs.
 *
 * softrnic builds a libibverbs.so.1 of its own (same soname and symbol
 * versions as rdma-core's) and a librdmacm.so.1. Installed, they live in
 * <prefix>/lib/softrnic, a folder of their own that no loader searches by
 * default, so they never shadow the system's rdma-core; in the build tree
 * they are in build/lib. Either way they sit next to the running
 * <prefix>/bin/softrnic. Putting that directory first in LD_LIBRARY_PATH
 * makes the dynamic loader pick it for any unmodified verbs binary; `run`
 * does exactly that and then execvp()s the program, so the program keeps
 * softrnic's PID, stdin/stdout and signals, and its exit status is the
 * tool's.
 *
 * Invariants: the library directory is located from /proc/self/exe, never
 * from the current directory or PATH, so `run` cannot pick up a stray
 * libibverbs.so.1; nothing is changed in the environment unless the
 * library was found.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run_ns.h"
#include "subcommands.h"

#define RUN_LIB_NAME "libibverbs.so.1"

/* Exit statuses of a shell that cannot run a command (POSIX sh 2.8.2). */
#define RUN_EXIT_NOEXEC 126
#define RUN_EXIT_NOTFOUND 127

struct run_opts {
	const char *devices; /* --devices: value for SOFTRNIC_DEVICES */
	const char *pcap;    /* --pcap: value for SOFTRNIC_PCAP */
	int no_sysfs;        /* --no-sysfs or SOFTRNIC_SYSFS=0: no private view */
	int rs_preload;      /* --rsocket-preload: librspreload.so in LD_PRELOAD */
	char **prog_argv;    /* PROG ARGS..., NULL-terminated */
};

void srn_usage_run(FILE *out)
{
	fprintf(out,
		"Usage: softrnic run [--devices SPEC] [--pcap FILE] [--no-sysfs] [--rsocket-preload]\n"
		"                   [--] PROG [ARGS...]\n"
		"\n"
		"Runs PROG with softrnic as its verbs library: the directory holding\n"
		"softrnic's " RUN_LIB_NAME " and librdmacm.so.1 (<prefix>/lib/softrnic\n"
		"when installed, <build>/lib in a build tree, found next to this\n"
		"<prefix>/bin/softrnic) is put first in LD_LIBRARY_PATH and PROG is\n"
		"executed in place of softrnic. Unmodified programs (ibv_devinfo,\n"
		"ibv_rc_pingpong, perftest, UCX, libfabric, MPI, ...) then see\n"
		"softrnic devices. `softrnic run -- $SHELL` gives a shell whose every\n"
		"program does.\n"
		"\n"
		"PROG also runs in a private mount namespace (plus a user namespace\n"
		"mapping your uid to itself, when not root) where\n"
		"/dev/infiniband/uverbsN and /sys/class/infiniband/NAME describe the\n"
		"softrnic devices, as UCX and libfabric expect of a verbs device; the\n"
		"rest of /dev and /sys/class, the network and the processes are the\n"
		"same as outside. Where namespaces are not allowed, a warning says so\n"
		"and PROG runs without that view.\n"
		"\n"
		"Options:\n"
		"  --devices SPEC  set SOFTRNIC_DEVICES=SPEC for PROG\n"
		"  --pcap FILE     set SOFTRNIC_PCAP=FILE for PROG\n"
		"  --no-sysfs      no private /dev and /sys view (also SOFTRNIC_SYSFS=0)\n"
		"  --rsocket-preload\n"
		"                  put rdma-core's librspreload.so (package librdmacm1)\n"
		"                  first in LD_PRELOAD: PROG's TCP sockets become\n"
		"                  rsockets, carried by softrnic's RDMA\n"
		"  -h, --help      show this help\n"
		"\n"
		"Environment (read by the softrnic library inside PROG):\n"
		"  SOFTRNIC_DEVICES  the devices to create: entries separated by ';',\n"
		"                    each name=NAME,addr=IP,port=UDP_PORT,mtu=BYTES\n"
		"                    e.g. \"name=srn0,addr=127.0.0.9,port=4791,mtu=1500\".\n"
		"                    addr is required (addr=auto: a free 127.0.0.N);\n"
		"                    name defaults to softrnicN, port to 4791, mtu to\n"
		"                    the MTU of the interface that has addr.\n"
		"  SOFTRNIC_CONFIG   a file with one such entry per line ('#' starts\n"
		"                    a comment); used when SOFTRNIC_DEVICES is unset.\n"
		"                    With neither: one device, softrnic0, on a free\n"
		"                    loopback address 127.0.0.N, UDP port 4791.\n"
		"  SOFTRNIC_PCAP     write a pcap trace of PROG's RoCEv2 packets to\n"
		"                    this file.\n"
		"  LD_LIBRARY_PATH   set by `run`: softrnic's lib directory first,\n"
		"                    then the value it had.\n"
		"\n"
		"Exit status: PROG's own; 127 if PROG was not found, 126 if it\n"
		"could not be executed, 1 if softrnic's " RUN_LIB_NAME " is missing,\n"
		"2 on a usage error.\n");
}

/* Strip the last path component in place; false if there is none left. */
static int strip_last_component(char *path)
{
	char *slash = strrchr(path, '/');

	if (!slash || slash == path)
		return 0;
	*slash = '\0';
	return 1;
}

/* Where our libraries sit below <prefix>: installed first, then the build
 * tree's layout (build/bin/softrnic, build/lib). */
static const char *const run_lib_subdirs[] = { "lib/softrnic", "lib" };

/*
 * Find the directory holding our libibverbs.so.1, where the running binary
 * is <prefix>/bin/softrnic.  Returns 0 and fills libdir, or -errno after
 * printing an error that names the paths it looked at.
 */
static int find_libdir(char *libdir, size_t len)
{
	char exe[PATH_MAX], prefix[PATH_MAX], lib[PATH_MAX + 32];
	ssize_t n;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0) {
		fprintf(stderr, "softrnic run: cannot read /proc/self/exe: %s\n",
			strerror(errno));
		return -errno;
	}
	exe[n] = '\0';

	memcpy(prefix, exe, (size_t)n + 1);
	if (!strip_last_component(prefix) || !strip_last_component(prefix)) {
		fprintf(stderr, "softrnic run: cannot derive <prefix> from %s "
				"(expected <prefix>/bin/softrnic)\n", exe);
		return -ENOENT;
	}

	for (size_t i = 0; i < sizeof(run_lib_subdirs) / sizeof(run_lib_subdirs[0]); i++) {
		snprintf(lib, sizeof(lib), "%s/%s/%s", prefix, run_lib_subdirs[i], RUN_LIB_NAME);
		if (access(lib, R_OK) != 0)
			continue;
		if ((size_t)snprintf(libdir, len, "%s/%s", prefix, run_lib_subdirs[i]) >= len)
			return -ENAMETOOLONG;
		return 0;
	}
	fprintf(stderr, "softrnic run: softrnic's %s not found: neither "
			"%s/lib/softrnic/%s nor %s/lib/%s exists\n  (searched next to "
			"%s; was the library built or installed?)\n",
		RUN_LIB_NAME, prefix, RUN_LIB_NAME, prefix, RUN_LIB_NAME, exe);
	return -ENOENT;
}

/* Prepend dir to LD_LIBRARY_PATH, keeping what the user had after it. */
static int prepend_library_path(const char *dir)
{
	const char *old = getenv("LD_LIBRARY_PATH");
	char *value;
	int rc;

	if (old && *old)
		rc = asprintf(&value, "%s:%s", dir, old);
	else
		rc = asprintf(&value, "%s", dir);
	if (rc < 0)
		return -ENOMEM;
	rc = setenv("LD_LIBRARY_PATH", value, 1) ? -errno : 0;
	free(value);
	return rc;
}

enum { OPT_DEVICES = 256, OPT_PCAP, OPT_NO_SYSFS, OPT_RS_PRELOAD };

/* Where distributions put rdma-core's rsockets preload library. */
static const char *const rs_preload_paths[] = {
	"/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so",   /* Debian, Ubuntu */
	"/usr/lib/aarch64-linux-gnu/rsocket/librspreload.so",
	"/usr/lib64/rsocket/librspreload.so",                  /* Fedora, SUSE */
	"/usr/lib/rsocket/librspreload.so",
};

/* Prepend librspreload.so to LD_PRELOAD.  Our librdmacm.so.1 (first in
 * LD_LIBRARY_PATH) is the one it then calls. */
static int add_rs_preload(void)
{
	const char *lib = NULL;
	for (size_t i = 0; i < sizeof(rs_preload_paths) / sizeof(rs_preload_paths[0]); i++)
		if (access(rs_preload_paths[i], R_OK) == 0) {
			lib = rs_preload_paths[i];
			break;
		}
	if (!lib) {
		fprintf(stderr, "softrnic run: librspreload.so not found (tried %s and others); "
				"install librdmacm1\n", rs_preload_paths[0]);
		return -ENOENT;
	}
	const char *old = getenv("LD_PRELOAD");
	char *value;
	if (asprintf(&value, "%s%s%s", lib, old && *old ? ":" : "", old && *old ? old : "") < 0)
		return -ENOMEM;
	int rc = setenv("LD_PRELOAD", value, 1) ? -errno : 0;
	free(value);
	return rc;
}

/* Returns -1 to go on, or the exit status to return right away. */
static int parse_run_args(int argc, char *argv[], struct run_opts *o)
{
	static const struct option longopts[] = {
		{ "devices", required_argument, NULL, OPT_DEVICES },
		{ "pcap", required_argument, NULL, OPT_PCAP },
		{ "no-sysfs", no_argument, NULL, OPT_NO_SYSFS },
		{ "rsocket-preload", no_argument, NULL, OPT_RS_PRELOAD },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	/* '+': stop at PROG, so PROG's own options are left alone. */
	while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_DEVICES:
			o->devices = optarg;
			break;
		case OPT_PCAP:
			o->pcap = optarg;
			break;
		case OPT_NO_SYSFS:
			o->no_sysfs = 1;
			break;
		case OPT_RS_PRELOAD:
			o->rs_preload = 1;
			break;
		case 'h':
			srn_usage_run(stdout);
			return SRN_EXIT_OK;
		default:
			srn_usage_run(stderr);
			return SRN_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "softrnic run: no program given\n\n");
		srn_usage_run(stderr);
		return SRN_EXIT_USAGE;
	}
	o->prog_argv = &argv[optind];
	return -1;
}

static int set_environment(const struct run_opts *o, const char *libdir)
{
	int rc = prepend_library_path(libdir);

	if (!rc && o->devices && setenv("SOFTRNIC_DEVICES", o->devices, 1))
		rc = -errno;
	if (!rc && o->pcap && setenv("SOFTRNIC_PCAP", o->pcap, 1))
		rc = -errno;
	if (!rc && o->rs_preload && (rc = add_rs_preload()) == -ENOENT)
		return rc;      /* add_rs_preload said what is missing */
	if (rc)
		fprintf(stderr, "softrnic run: cannot set environment: %s\n",
			strerror(-rc));
	return rc;
}

int srn_cmd_run(int argc, char *argv[])
{
	struct run_opts o = { 0 };
	char libdir[PATH_MAX];
	int rc, err;

	rc = parse_run_args(argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (find_libdir(libdir, sizeof(libdir)) || set_environment(&o, libdir))
		return SRN_EXIT_FAIL;
	const char *sysfs = getenv("SOFTRNIC_SYSFS");
	if (!o.no_sysfs && !(sysfs && !strcmp(sysfs, "0")))
		srn_run_ns_setup();  /* on failure it warned; run PROG anyway */

	fflush(NULL);
	execvp(o.prog_argv[0], o.prog_argv);
	err = errno;
	fprintf(stderr, "softrnic run: cannot execute '%s': %s\n",
		o.prog_argv[0], err == ENOENT ? "command not found" :
						strerror(err));
	return (err == ENOENT || err == ENOTDIR) ? RUN_EXIT_NOTFOUND :
						   RUN_EXIT_NOEXEC;
}
