# ECN and DCQCN on real traffic (issue 16): the ECN bits on the device
# socket, CNPs between two processes, rate limits honoured.
srn_unit_test(test_cc_wire_ecn test_cc_wire_ecn.c)
set_property(TEST test_cc_wire_ecn APPEND PROPERTY LABELS fast)
srn_script_test(test_cc_wire_cnp test_cc_wire_cnp.sh)
