# libfabric over softrnic (issue 13): Debian's unmodified fi_info and
# fi_pingpong (libfabric-bin, libfabric 1.17) through `softrnic run`: the
# verbs provider's DGRAM endpoint and ofi_rxd's RDM on loopback; MSG, DGRAM
# and ofi_rxm's RDM between two network namespaces. Skipped without
# libfabric-bin.
foreach(mode info lo netns)
  add_test(NAME libfabric_${mode} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_libfabric.sh ${mode})
  set_tests_properties(libfabric_${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "SRN_BUILD=${CMAKE_BINARY_DIR};SRN_SRC=${CMAKE_SOURCE_DIR}"
    LABELS e2e)
endforeach()

# The rdma_cm calls behind them, one by one: linked against our
# librdmacm.so.1 as an rdma_cm program is.
add_executable(test_cm_libfabric_calls test_cm_libfabric_calls.c)
target_link_libraries(test_cm_libfabric_calls PRIVATE rdmacm)
add_test(NAME test_cm_libfabric_calls COMMAND test_cm_libfabric_calls)
set_tests_properties(test_cm_libfabric_calls PROPERTIES TIMEOUT 60 LABELS "unit;fast")
