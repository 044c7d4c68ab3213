# UD multicast between processes, through the public verbs API.
add_executable(test_ud_mcast test_ud_mcast.c)
target_link_libraries(test_ud_mcast PRIVATE softrnic)
target_include_directories(test_ud_mcast PRIVATE ${IBVERBS_INCLUDE})
add_test(NAME test_ud_mcast COMMAND test_ud_mcast)
set_tests_properties(test_ud_mcast PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
