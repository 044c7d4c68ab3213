# Connected-mode rdma_cm programs people run first, and the failure paths
# (issue 12): perftest -R and qperf -cm1 through `softrnic run`.
foreach(mode bw lat qperf)
  add_test(NAME cm_perftest_${mode} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_cm_perftest.sh ${mode})
  set_tests_properties(cm_perftest_${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "SRN_BUILD=${CMAKE_BINARY_DIR};SRN_SRC=${CMAKE_SOURCE_DIR}"
    LABELS e2e)
endforeach()

# A peer killed with SIGKILL: the survivor's DISCONNECTED comes at once.
srn_script_test(cm_peer_killed test_cm_peer_killed.sh)

# Two listeners on one port in two processes: EADDRINUSE / EADDRNOTAVAIL.
srn_script_test(cm_port_in_use test_cm_port_in_use.sh)
# A full listen backlog: the REQ beyond it is dropped, retried, connected.
add_executable(test_cm_backlog test_cm_backlog.c)
target_link_libraries(test_cm_backlog PRIVATE rdmacm)
srn_script_test(cm_backlog test_cm_backlog.sh)

# CM MADs by type in `softrnic stat`, and decoded by tshark in the trace.
srn_script_test(cm_stat test_cm_stat.sh)
srn_script_test(bell_reattach test_bell_reattach.sh)
