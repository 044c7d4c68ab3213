/* workload.h - `blockstore bench` (workload.c). */
#ifndef BS_WORKLOAD_H
#define BS_WORKLOAD_H

int bs_bench_main(int argc, char **argv);

#endif
