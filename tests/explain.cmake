# `softrnic explain`'s diagnoses (tools/explain_diag.c): the rules on
# synthetic counter snapshots and log lines (including the PFC pause
# counters, which the library does not count yet), and a retransmission
# storm provoked for real with the fault injector under Debian's
# unmodified ibv_rc_pingpong.  The stale-rkey story is provoked by the
# block store example (tests/blockstore.cmake, blockstore_stale_rkey).
srn_unit_test(test_explain_diag test_explain_diag.c
  ${CMAKE_SOURCE_DIR}/tools/explain_diag.c)
target_include_directories(test_explain_diag PRIVATE ${CMAKE_SOURCE_DIR}/tools)
set_property(TEST test_explain_diag APPEND PROPERTY LABELS fast)

srn_script_test(explain_retransmit_storm test_explain_storm.sh)
