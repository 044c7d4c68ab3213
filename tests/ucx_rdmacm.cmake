# UCX's own wire-up over our librdmacm (issue 13): Debian's unmodified
# io_demo connects by socket address through UCX's rdmacm connection
# manager, on loopback and between two network namespaces.
foreach(mode lo netns)
  add_test(NAME ucx_rdmacm_${mode} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_ucx_rdmacm.sh ${mode})
  set_tests_properties(ucx_rdmacm_${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "SRN_BUILD=${CMAKE_BINARY_DIR};SRN_SRC=${CMAKE_SOURCE_DIR}"
    LABELS e2e)
endforeach()
