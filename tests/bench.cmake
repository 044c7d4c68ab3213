# bench/compare.sh (issues 6, 13, 14) in its --quick mode: every column
# (softrnic direct and rings, UCX posix/cma, libfabric shm, UCX and
# libfabric over softrnic, and the UDP-link columns: softrnic, UCX tcp,
# libfabric tcp, the UDP floor) once at 8 B latency and 64 KiB bandwidth.
# Checks that the table and its CSV/JSON are produced, that each column
# that could run has its numbers and that one that could not says why; not
# how fast anything is.  Then (issue 24) the sleeping floors once each
# (bench/eventfd_pingpong, bench/udp_pingpong --block, built with cc like
# udp_pingpong) and, with qperf installed, compare.sh --events --quick: the
# event-driven table, every row once.  About 1.5 minutes on a loaded 2-CPU
# machine.
srn_script_test(bench_smoke test_bench_smoke.sh)
set_tests_properties(bench_smoke PROPERTIES TIMEOUT 300)

# bench/perftest_same_host.sh (issue 14): Debian's perftest on one host,
# direct placement against the rings; one repetition, 1 s bandwidth runs.
# Checks every cell has a number; not how fast.  About 30 s.
srn_script_test(perftest_same_host_smoke test_perftest_same_host_smoke.sh)
set_tests_properties(perftest_same_host_smoke PROPERTIES TIMEOUT 300)
