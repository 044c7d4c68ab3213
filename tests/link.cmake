# link/: device configuration and the UDP socket (tests/test_link_*.c,
# tests/lib/netns.sh).
srn_unit_test(test_link_config ${CMAKE_CURRENT_LIST_DIR}/test_link_config.c)
srn_unit_test(test_link_udp ${CMAKE_CURRENT_LIST_DIR}/test_link_udp.c)
# Root only (raw-socket capture, tun in a private namespace); skips otherwise.
srn_unit_test(test_link_wire ${CMAKE_CURRENT_LIST_DIR}/test_link_wire.c)

# The namespace library itself, then softrnic's UDP link across it. The
# helper needs the namespaces the script creates, so it is not a test alone.
srn_script_test(test_netns_lib test_netns_lib.sh)
add_executable(test_link_netns ${CMAKE_CURRENT_LIST_DIR}/test_link_netns.c)
target_link_libraries(test_link_netns PRIVATE srn_static)
add_test(NAME test_link_netns
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_netns_lib.sh --link $<TARGET_FILE:test_link_netns>)
set_tests_properties(test_link_netns PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "SRN_BUILD=${CMAKE_BINARY_DIR};SRN_SRC=${CMAKE_SOURCE_DIR}"
  LABELS e2e)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_link_config test_link_udp test_link_wire
  test_netns_lib test_link_netns APPEND PROPERTY LABELS fast)
