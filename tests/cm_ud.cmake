# rdma_cm beyond connected RC: UD ids (SIDR), multicast joins, IPv6, and
# the rdmacm-utils that use them (udaddy, mckey, rdma_xserver/xclient,
# cmtime), unmodified, through `softrnic run`.
srn_unit_test(test_cm_sidr_mad test_cm_sidr_mad.c ${CMAKE_SOURCE_DIR}/src/cm/mad.c)
# The MAD parser again, starting from SIDR_REQ / SIDR_REP seeds.
srn_fuzz_target(fuzz_cm_mad_sidr RUNS 50000 SOURCES fuzz_cm_mad.c ${CMAKE_SOURCE_DIR}/src/cm/mad.c
  SEEDS ${CMAKE_CURRENT_LIST_DIR}/data/fuzz/cm_mad/sidr_req.bin
        ${CMAKE_CURRENT_LIST_DIR}/data/fuzz/cm_mad/sidr_rep.bin
        ${CMAKE_CURRENT_LIST_DIR}/data/fuzz/cm_mad/sidr_rep_unsupported.bin)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_cm_sidr_mad fuzz_cm_mad_sidr APPEND PROPERTY LABELS fast)
