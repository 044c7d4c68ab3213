# Same-host direct placement under a 4-process mix (issue 14): a target,
# two requesters that place directly and one on the UDP link, 100 000
# mixed operations on the same QPs and regions, then dereg while all
# three stream.  test_direct_stress.sh also checks the direct counters.
add_executable(test_direct_stress test_direct_stress.c helpers/rc_test_conn.c)
target_link_libraries(test_direct_stress PRIVATE softrnic)
target_include_directories(test_direct_stress PRIVATE ${IBVERBS_INCLUDE})
srn_script_test(direct_stress_100k test_direct_stress.sh LABELS stress)
# The same mix, 10 000 operations, for scripts/test.sh's ThreadSanitizer
# pass (the shared state: the direct table, the memfd-backed pages the
# requesters' atomics and the target's own CPU share, the fence slots).
srn_script_test(direct_stress_tsan test_direct_stress.sh LABELS stress)
set_tests_properties(direct_stress_tsan PROPERTIES ENVIRONMENT
  "SRN_BUILD=${CMAKE_BINARY_DIR};SRN_SRC=${CMAKE_SOURCE_DIR};SRN_DIRECT_STRESS_OPS=10000")
set_property(TEST direct_stress_tsan APPEND PROPERTY LABELS tsan)
