/*
 * proc_cpu.h - CPU time of a running process and of its softrnic progress
 * threads (named "srn-progress"), from /proc, for `softrnic stat`.
 *
 * The question users ask first about a software NIC is what it costs:
 * the progress thread's share of the process is that answer.
 */
#ifndef SRN_TOOLS_PROC_CPU_H
#define SRN_TOOLS_PROC_CPU_H

#include <stdbool.h>
#include <sys/types.h>

struct srn_proc_cpu {
	double process_s;       /* user + system, all threads */
	double progress_s;      /* user + system, the progress threads */
	unsigned progress_threads;
};

/* false if the process is gone or its /proc entries cannot be read. */
bool srn_proc_cpu_read(pid_t pid, struct srn_proc_cpu *out);

#endif
