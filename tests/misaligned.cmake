# Issue 23: callers may pack their structs.  Every verb that takes work
# requests, scatter lists, inline data lists or bind info reads them at
# any alignment (the UBSan build aborted on libiscsi's packed SGEs).  One
# test per case, so a failure names the verb.
add_executable(test_misaligned_sge ${CMAKE_CURRENT_LIST_DIR}/test_misaligned_sge.c
  ${CMAKE_CURRENT_LIST_DIR}/helpers/rc_test_conn.c)
target_link_libraries(test_misaligned_sge PRIVATE softrnic)
target_include_directories(test_misaligned_sge PRIVATE ${IBVERBS_INCLUDE})
foreach(c send inline rdma atomic srq xrc ud wr_api bind_mw)
  add_test(NAME misaligned_sge_${c} COMMAND test_misaligned_sge ${c})
  set_tests_properties(misaligned_sge_${c} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60
    LABELS "unit;fast")
endforeach()
