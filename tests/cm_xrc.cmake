# XRC through rdma_cm, and ephemeral rdma_cm ports across processes
# (issue 12): the codec's XRC fields, Debian's unmodified rdma_xserver /
# rdma_xclient -c x on loopback and between namespaces, and two processes
# binding port 0 at once.
srn_unit_test(test_cm_xrc_mad test_cm_xrc_mad.c ${CMAKE_SOURCE_DIR}/src/cm/mad.c)
# The MAD parser again, starting from an XRC REQ and an XRC target's REP.
srn_fuzz_target(fuzz_cm_mad_xrc RUNS 50000 SOURCES fuzz_cm_mad.c ${CMAKE_SOURCE_DIR}/src/cm/mad.c
  SEEDS ${CMAKE_CURRENT_LIST_DIR}/data/fuzz/cm_mad/xrc_req.bin
        ${CMAKE_CURRENT_LIST_DIR}/data/fuzz/cm_mad/xrc_rep.bin)
srn_script_test(cm_xrc test_cm_xrc.sh)
srn_script_test(cm_xrc_netns test_cm_xrc_netns.sh)

# The fast tier (ctest -L fast).
set_property(TEST test_cm_xrc_mad fuzz_cm_mad_xrc APPEND PROPERTY LABELS fast)

# Ephemeral ports: two processes binding port 0 a thousand times each, at
# once, never share one; an explicit bind sees them; dead holders' go.
add_executable(test_cm_ephemeral test_cm_ephemeral.c)
target_link_libraries(test_cm_ephemeral PRIVATE rdmacm)
srn_script_test(cm_ephemeral test_cm_ephemeral.sh)

# XRC through the asynchronous API: two XRC send ids into one XRC SRQ of
# the passive side, and each XRC type's attribute sets.
add_executable(test_cm_xrc_api test_cm_xrc_api.c)
target_link_libraries(test_cm_xrc_api PRIVATE rdmacm ibverbs)
add_test(NAME test_cm_xrc_api COMMAND test_cm_xrc_api)
set_tests_properties(test_cm_xrc_api PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 90 LABELS e2e)
