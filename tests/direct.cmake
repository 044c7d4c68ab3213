# Same-host direct placement (issue 14: transport/direct.c, link/direct.h).
# test_direct runs two processes through the public verbs API; the script
# runs each mode with direct placement on and off and checks the counters
# say which path ran.  test_direct_fence tests the table's fence and
# seqlock alone (threads and a forked requester that dies mid-placement).
add_executable(test_direct test_direct.c helpers/rc_test_conn.c)
target_link_libraries(test_direct PRIVATE softrnic)
target_include_directories(test_direct PRIVATE ${IBVERBS_INCLUDE})
srn_script_test(direct_modes test_direct.sh)
srn_unit_test(test_direct_fence ${CMAKE_CURRENT_LIST_DIR}/test_direct_fence.c)
set_property(TEST test_direct_fence APPEND PROPERTY LABELS tsan)
srn_script_test(direct_perftest test_direct_perftest.sh)
# A packet trace keeps direct placement on: test_direct trace's operations
# recorded as their packets (transport/direct_trace.c), checked by tshark
# and pcap_icrc_check (tests/fault.cmake).
srn_script_test(direct_pcap test_direct_pcap.sh)

set_property(TEST test_direct_fence APPEND PROPERTY LABELS fast)

# Regions under 64 KiB placed through a mapping too (issue 29).
add_executable(test_direct_small test_direct_small.c helpers/rc_test_conn.c)
target_link_libraries(test_direct_small PRIVATE softrnic)
target_include_directories(test_direct_small PRIVATE ${IBVERBS_INCLUDE})
srn_script_test(direct_small test_direct_small.sh)
