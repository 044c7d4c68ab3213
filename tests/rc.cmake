# RC data path through the public verbs API, linked against libsoftrnic.
add_executable(test_rc_verbs test_rc_verbs.c helpers/rc_test_conn.c helpers/hang_dump.c)
target_link_libraries(test_rc_verbs PRIVATE softrnic)
target_include_directories(test_rc_verbs PRIVATE ${IBVERBS_INCLUDE})
add_test(NAME test_rc_verbs COMMAND test_rc_verbs)
set_tests_properties(test_rc_verbs PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
  LABELS "unit;tsan")
srn_script_test(explain_errors test_explain_errors.sh)
srn_script_test(fault_counters test_fault_counters.sh)
srn_script_test(pcap_mixed test_pcap_mixed.sh LABELS stress)
srn_script_test(stat_live test_stat_live.sh)

# A GSO run stays within UIO_MAXIOV pieces (64 Sends of 17 SGEs in a chain,
# over UDP), and a path that refuses GSO mid-burst switches to plain sends
# without losing data (an LD_PRELOAD that refuses UDP_SEGMENT as such a
# kernel would: sendmmsg returns the count before it, the error is lost).
add_executable(test_gso_iov_limit test_gso_iov_limit.c helpers/rc_test_conn.c)
target_link_libraries(test_gso_iov_limit PRIVATE softrnic)
target_include_directories(test_gso_iov_limit PRIVATE ${IBVERBS_INCLUDE})
add_test(NAME test_gso_iov_limit COMMAND test_gso_iov_limit)
set_tests_properties(test_gso_iov_limit PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
  LABELS e2e)
add_library(gso_refuse_preload MODULE helpers/gso_refuse_preload.c)
target_link_libraries(gso_refuse_preload PRIVATE ${CMAKE_DL_LIBS})
srn_script_test(gso_refused test_gso_refused.sh)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_rc_verbs explain_errors test_gso_iov_limit
  gso_refused APPEND PROPERTY LABELS fast)

# The responder's owed ACK: a duplicate's ACK never replaces an owed NAK.
srn_unit_test(test_ack_coalesce test_ack_coalesce.c)
set_property(TEST test_ack_coalesce APPEND PROPERTY LABELS fast)
