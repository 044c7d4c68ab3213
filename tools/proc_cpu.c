/*
 * proc_cpu.c - see proc_cpu.h.
 */
#include "proc_cpu.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* utime + stime in clock ticks from a stat line, and the thread's name.
 * The name sits in parentheses and may hold spaces or ')': the fields
 * start after the last ')'. */
static bool parse_stat(const char *line, char *name, size_t namelen, unsigned long long *ticks)
{
	const char *open = strchr(line, '(');
	const char *close = strrchr(line, ')');
	if (!open || !close || close < open)
		return false;
	size_t n = (size_t)(close - open - 1);
	if (n >= namelen)
		n = namelen - 1;
	memcpy(name, open + 1, n);
	name[n] = 0;
	/* After ")": state is field 3; utime and stime are fields 14 and 15. */
	unsigned long long ut, st;
	if (sscanf(close + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
		   &ut, &st) != 2)
		return false;
	*ticks = ut + st;
	return true;
}

static bool read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	return ok;
}

bool srn_proc_cpu_read(pid_t pid, struct srn_proc_cpu *out)
{
	long hz = sysconf(_SC_CLK_TCK);
	if (hz <= 0)
		return false;
	char path[64], line[1024], name[64];
	unsigned long long ticks;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!read_line(path, line, sizeof(line)) ||
	    !parse_stat(line, name, sizeof(name), &ticks))
		return false;
	*out = (struct srn_proc_cpu){ .process_s = (double)ticks / (double)hz };
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return true;            /* the process total is still right */
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char tpath[96];
		snprintf(tpath, sizeof(tpath), "/proc/%d/task/%.16s/stat", (int)pid, e->d_name);
		if (read_line(tpath, line, sizeof(line)) &&
		    parse_stat(line, name, sizeof(name), &ticks) && !strcmp(name, "srn-progress")) {
			out->progress_s += (double)ticks / (double)hz;
			out->progress_threads++;
		}
	}
	closedir(d);
	return true;
}
