# Many processes behind one device address (issue 13, item 6;
# link/udp_group.h): the steering program, forwarding and doorbells in one
# process (test_udp_group), then Debian's pingpongs with several processes
# given one SOFTRNIC_DEVICES address, on loopback and 4 + 4 across two
# network namespaces (root; skipped otherwise).
srn_unit_test(test_udp_group ${CMAKE_CURRENT_LIST_DIR}/test_udp_group.c)
srn_unit_test(test_udp_group_prog ${CMAKE_CURRENT_LIST_DIR}/test_udp_group_prog.c)
foreach(mode loopback netns)
  add_test(NAME shared_addr_${mode} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_shared_addr.sh ${mode})
  set_tests_properties(shared_addr_${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "SRN_BUILD=${CMAKE_BINARY_DIR};SRN_SRC=${CMAKE_SOURCE_DIR}"
    LABELS e2e)
endforeach()

# 64 processes behind one address, a third killed (the first included),
# rdma_cm pairs connecting before and after: bench/shared_many.sh runs 256.
add_executable(test_shared_many ${CMAKE_CURRENT_LIST_DIR}/test_shared_many.c)
target_link_libraries(test_shared_many PRIVATE rdmacm ibverbs)
add_test(NAME shared_many COMMAND test_shared_many 64)
set_tests_properties(shared_many PROPERTIES TIMEOUT 420 LABELS e2e COST 60)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_udp_group test_udp_group_prog APPEND PROPERTY LABELS fast)

# No variable set: rdma_cm programs reach each other at 127.0.0.1 in any
# start order, next to an unrelated softrnic process.
srn_script_test(default_addr test_default_addr.sh LABELS e2e)

# A forked child keeps none of the device's sockets (link/fork_drop.h).
add_executable(fork_keeper ${CMAKE_CURRENT_LIST_DIR}/helpers/fork_keeper.c)
target_link_libraries(fork_keeper PRIVATE ibverbs)
srn_script_test(fork_child_socket test_fork_child_socket.sh LABELS e2e)

# Members SIGKILLed without leaving, one stopped: every survivor's
# datagrams reach its own socket soon after, none through another member
# (link/udp_group_probe.c; known-issues.md, `rereg_recv_udp`).
add_executable(test_shared_kill ${CMAKE_CURRENT_LIST_DIR}/test_shared_kill.c
  ${CMAKE_CURRENT_LIST_DIR}/helpers/rc_test_conn.c)
target_link_libraries(test_shared_kill PRIVATE softrnic)
target_include_directories(test_shared_kill PRIVATE ${IBVERBS_INCLUDE})
add_test(NAME shared_kill_steer COMMAND test_shared_kill)
set_tests_properties(shared_kill_steer PROPERTIES TIMEOUT 120 LABELS e2e)
