# UD multicast between processes, through the public verbs API.
add_executable(test_ud_mcast test_ud_mcast.c)
target_link_libraries(test_ud_mcast PRIVATE softrnic)
target_include_directories(test_ud_mcast PRIVATE ${IBVERBS_INCLUDE})
add_test(NAME test_ud_mcast COMMAND test_ud_mcast)
set_tests_properties(test_ud_mcast PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
  LABELS "e2e;tsan")

# UC under the fault injector: whole messages lost, never torn ones.
add_executable(test_uc_faults test_uc_faults.c helpers/rc_test_conn.c)
target_link_libraries(test_uc_faults PRIVATE softrnic)
target_include_directories(test_uc_faults PRIVATE ${IBVERBS_INCLUDE})
add_test(NAME test_uc_faults COMMAND test_uc_faults)
set_tests_properties(test_uc_faults PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
  LABELS e2e)
srn_script_test(ud_mcast_netns test_ud_mcast_netns.sh)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_ud_mcast test_uc_faults ud_mcast_netns
  APPEND PROPERTY LABELS fast)
