# Issue 4: the ibv_wr_* API and the classic ibv_post_send put identical
# packets on the wire for the same work (compared in a SOFTRNIC_PCAP trace).
add_executable(test_wr_api_packets ${CMAKE_CURRENT_LIST_DIR}/test_wr_api_packets.c
  ${CMAKE_CURRENT_LIST_DIR}/helpers/rc_test_conn.c)
target_link_libraries(test_wr_api_packets PRIVATE softrnic)
target_include_directories(test_wr_api_packets PRIVATE ${IBVERBS_INCLUDE})
add_test(NAME test_wr_api_packets COMMAND test_wr_api_packets)
set_tests_properties(test_wr_api_packets PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60
  LABELS "unit;tsan")

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_wr_api_packets APPEND PROPERTY LABELS fast)
