# bench/compare.sh (issue 6) in its --quick mode: softrnic and the raw UDP
# floor at 8 B, one run each.  Checks that the table and its CSV/JSON are
# produced and parse, not how fast anything is.  Takes about 10 s.
srn_script_test(bench_smoke test_bench_smoke.sh)
set_tests_properties(bench_smoke PROPERTIES TIMEOUT 120)
