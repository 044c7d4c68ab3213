# rdma_cm beyond connected RC: UD ids (SIDR), multicast joins, IPv6, and
# the rdmacm-utils that use them (udaddy, mckey, rdma_xserver/xclient,
# cmtime), unmodified, through `softrnic run`.
srn_unit_test(test_cm_sidr_mad test_cm_sidr_mad.c ${CMAKE_SOURCE_DIR}/src/cm/mad.c)
# The MAD parser again, starting from SIDR_REQ / SIDR_REP seeds.
srn_fuzz_target(fuzz_cm_mad_sidr RUNS 50000 SOURCES fuzz_cm_mad.c ${CMAKE_SOURCE_DIR}/src/cm/mad.c
  SEEDS ${CMAKE_CURRENT_LIST_DIR}/data/fuzz/cm_mad/sidr_req.bin
        ${CMAKE_CURRENT_LIST_DIR}/data/fuzz/cm_mad/sidr_rep.bin
        ${CMAKE_CURRENT_LIST_DIR}/data/fuzz/cm_mad/sidr_rep_unsupported.bin)
srn_script_test(cm_ud_udaddy test_cm_ud.sh)
srn_script_test(cm_ud_mckey test_cm_mcast.sh)
srn_script_test(cm_xutils test_cm_xutils.sh)
srn_script_test(cm_ipv6_netns test_cm_ipv6.sh)

# Multicast joins through the API, one process: a C program linked against
# our librdmacm.so.1 and libibverbs.so.1, as an application is.
add_executable(test_cm_mcast_api test_cm_mcast_api.c)
target_link_libraries(test_cm_mcast_api PRIVATE rdmacm ibverbs)
add_test(NAME test_cm_mcast_api COMMAND test_cm_mcast_api)
set_tests_properties(test_cm_mcast_api PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 90 LABELS e2e)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_cm_sidr_mad fuzz_cm_mad_sidr test_cm_mcast_api APPEND PROPERTY LABELS fast)
