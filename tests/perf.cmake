# `softrnic perf` (issue 6): every operation and output format end to end on
# loopback, two processes per run.  Finishes in seconds; the timeout only
# catches a hang.
srn_script_test(perf test_perf.sh)
set_tests_properties(perf PROPERTIES TIMEOUT 120)
