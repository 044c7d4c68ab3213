# RC data path through the public verbs API, linked against libsoftrnic.
add_executable(test_rc_verbs test_rc_verbs.c)
target_link_libraries(test_rc_verbs PRIVATE softrnic)
target_include_directories(test_rc_verbs PRIVATE ${IBVERBS_INCLUDE})
add_test(NAME test_rc_verbs COMMAND test_rc_verbs)
set_tests_properties(test_rc_verbs PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
srn_script_test(explain_errors test_explain_errors.sh)
srn_script_test(fault_counters test_fault_counters.sh)
srn_script_test(pcap_mixed test_pcap_mixed.sh)
