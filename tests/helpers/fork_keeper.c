/*
 * fork_keeper.c - a process that opens its softrnic device, forks a child
 * that lives on without exec (a daemon's worker, a pre-fork server), then
 * closes the device and exits.  Prints the child's pid and how many
 * sockets the child holds (this program opens none of its own: any socket
 * there came with the device); the child then sleeps SECONDS.
 *
 *   fork_keeper SECONDS
 * Exit 0, 1 on a failure.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static int sockets_held(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char path[300], target[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t len = readlink(path, target, sizeof(target) - 1);
		if (len > 0) {
			target[len] = 0;
			n += !strncmp(target, "socket:", 7);
		}
	}
	closedir(d);
	return n;
}

/* The child: report, let go of the caller's pipes (a $(fork_keeper)
 * waits for them), live on. */
static void child(int report, int secs)
{
	int held = sockets_held();
	if (write(report, &held, sizeof(held)) != (ssize_t)sizeof(held))
		_exit(1);
	close(report);
	int nul = open("/dev/null", O_RDWR);
	if (nul >= 0) {
		dup2(nul, STDOUT_FILENO);
		dup2(nul, STDERR_FILENO);
		close(nul);
	}
	sleep((unsigned)secs);
	_exit(0);
}

int main(int argc, char **argv)
{
	int secs = argc > 1 ? atoi(argv[1]) : 20;
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1)
		return 1;
	struct ibv_context *ctx = ibv_open_device(list[0]);
	if (!ctx)
		return 1;
	int report[2];
	if (pipe(report))
		return 1;
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(report[0]);
		child(report[1], secs);
	}
	close(report[1]);
	int held = -1;
	if (read(report[0], &held, sizeof(held)) != (ssize_t)sizeof(held))
		return 1;
	printf("%d %d\n", (int)pid, held);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
