# Issue 16, the switch side and the demo: softrnic senders honour the
# emulated switch's pause, ECMP spreads flows, and the three-way incast.
#
# The pause hook over the UDP link, two processes, no root needed.
srn_unit_test(test_cc_pause test_cc_pause.c helpers/rc_test_conn.c
  ${CMAKE_SOURCE_DIR}/tools/switch_pause.c)
target_include_directories(test_cc_pause PRIVATE ${CMAKE_SOURCE_DIR}/tools)
set_property(TEST test_cc_pause APPEND PROPERTY LABELS fast)

# ECMP: two equal-cost egress links, flows spread by 5-tuple (root).
srn_script_test(test_cc_ecmp test_cc_ecmp.sh)

# The three-way incast demo, 3 s per case (root; bench/incast.sh).
srn_script_test(test_cc_demo test_cc_demo.sh)
set_tests_properties(test_cc_demo PROPERTIES TIMEOUT 600)

# pace_line_rate: every RC QP held to the line rate from its first packet
# (what the demo's senders need on 100 Mb/s links); off by default.
srn_script_test(test_cc_line_pace test_cc_line_pace.sh)
