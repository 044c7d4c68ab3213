# UCX over softrnic (issue 13): Debian's unmodified ucx_info and
# ucx_perftest through `softrnic run`, rc_verbs and ud_verbs on loopback and
# between two network namespaces,
# and once as an ordinary user. Skipped without ucx-utils.
foreach(mode info rc ud netns user)
  add_test(NAME ucx_${mode} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_ucx.sh ${mode})
  set_tests_properties(ucx_${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "SRN_BUILD=${CMAKE_BINARY_DIR};SRN_SRC=${CMAKE_SOURCE_DIR}"
    LABELS e2e)
endforeach()

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST ucx_info ucx_user APPEND PROPERTY LABELS fast)
