# link/: the fault injector (SOFTRNIC_FAULTS) and the pcap trace
# (SOFTRNIC_PCAP) that hook into the UDP socket.
srn_unit_test(test_link_fault ${CMAKE_CURRENT_LIST_DIR}/test_link_fault.c)
srn_unit_test(test_link_pcap ${CMAKE_CURRENT_LIST_DIR}/test_link_pcap.c)

# Helper of test_link_pcap.sh: an independent ICRC check of every frame of
# a capture. Not a test by itself.
add_executable(pcap_icrc_check ${CMAKE_CURRENT_LIST_DIR}/helpers/pcap_icrc_check.c)
target_link_libraries(pcap_icrc_check PRIVATE srn_static)
srn_script_test(test_link_pcap_pingpong test_link_pcap.sh)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_link_pcap APPEND PROPERTY LABELS fast)
