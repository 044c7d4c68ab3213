# ECN and DCQCN on real traffic (issue 16): the ECN bits on the device
# socket, CNPs between two processes, rate limits honoured.
srn_unit_test(test_cc_wire_ecn test_cc_wire_ecn.c)
set_property(TEST test_cc_wire_ecn APPEND PROPERTY LABELS fast)
srn_script_test(test_cc_wire_cnp test_cc_wire_cnp.sh)

# Rate limits honoured: through the same-host rings and over UDP.
add_executable(test_cc_wire_rate test_cc_wire_rate.c helpers/rc_test_conn.c)
target_link_libraries(test_cc_wire_rate PRIVATE softrnic)
target_include_directories(test_cc_wire_rate PRIVATE ${IBVERBS_INCLUDE})
add_test(NAME test_cc_wire_rate COMMAND test_cc_wire_rate)
add_test(NAME test_cc_wire_rate_udp COMMAND test_cc_wire_rate)
set_tests_properties(test_cc_wire_rate test_cc_wire_rate_udp PROPERTIES
  SKIP_RETURN_CODE 77 TIMEOUT 180 LABELS e2e)
set_property(TEST test_cc_wire_rate_udp APPEND PROPERTY ENVIRONMENT SOFTRNIC_SHM=0)
