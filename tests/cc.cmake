# Congestion control (issue 16): the DCQCN reaction point, the per-QP
# pacer, the notification point, the CNP on the wire, ECN marking, and
# `softrnic switch`.  The rate machine and the pacer are pure: unit tests
# with simulated time.
srn_unit_test(test_cc_dcqcn test_cc_dcqcn.c)
srn_unit_test(test_cc_pacer_np test_cc_pacer_np.c)
srn_unit_test(test_cc_dcqcn_env test_cc_dcqcn_env.c)
srn_unit_test(test_cc_cnp_wire test_cc_cnp_wire.c helpers/test_wire_util.c)
target_compile_definitions(test_cc_cnp_wire PRIVATE
  SRN_FRAMES_TSV="${SRN_TESTDATA}/roce-frames.tsv")
srn_script_test(test_cc_cnp_tshark test_cc_cnp_tshark.sh LABELS unit)

set_property(TEST test_cc_dcqcn test_cc_dcqcn_env test_cc_pacer_np test_cc_cnp_wire test_cc_cnp_tshark
  APPEND PROPERTY LABELS fast)

# The emulated switch between namespaces (root; skipped otherwise).
srn_script_test(test_cc_switch test_cc_switch.sh)
# The switch's queue model alone (tools/switch_queue.c is pure).
srn_unit_test(test_cc_switch_queue test_cc_switch_queue.c
  ${CMAKE_SOURCE_DIR}/tools/switch_queue.c)
target_include_directories(test_cc_switch_queue PRIVATE ${CMAKE_SOURCE_DIR}/tools)
set_property(TEST test_cc_switch_queue APPEND PROPERTY LABELS fast)

# What the switch does to a frame from the wire, under the fuzz driver.
srn_fuzz_target(fuzz_switch_frame RUNS 200000 SOURCES fuzz_switch_frame.c
  ${CMAKE_SOURCE_DIR}/tools/switch_flow.c ${CMAKE_SOURCE_DIR}/tools/switch_queue.c
  SEEDS ${SRN_TESTDATA}/fuzz/switch_frame/cnp_ipv4.bin
        ${SRN_TESTDATA}/fuzz/switch_frame/vlan_ipv6.bin)
target_include_directories(fuzz_switch_frame PRIVATE ${CMAKE_SOURCE_DIR}/tools)
if(TARGET fuzz_switch_frame_libfuzzer)
  target_include_directories(fuzz_switch_frame_libfuzzer PRIVATE ${CMAKE_SOURCE_DIR}/tools)
endif()
set_property(TEST fuzz_switch_frame APPEND PROPERTY LABELS fast)

# The pure pieces closed into one loop: a 4-to-1 incast in simulated time.
srn_unit_test(test_cc_incast_sim test_cc_incast_sim.c ${CMAKE_SOURCE_DIR}/tools/switch_queue.c)
target_include_directories(test_cc_incast_sim PRIVATE ${CMAKE_SOURCE_DIR}/tools)
# A few seconds of CPU; minutes under ASan on a loaded machine.
set_tests_properties(test_cc_incast_sim PROPERTIES TIMEOUT 600)
