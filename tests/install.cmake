# Installing softrnic (issue 13, item 5): `cmake --install` into a temporary
# prefix, then Debian's ibv_rc_pingpong through the installed `softrnic run`;
# the whole-machine setup (ld.so.conf.d) played in a private mount namespace;
# the .deb from cpack, unpacked (never installed into the machine).
foreach(mode prefix machine deb)
  add_test(NAME install_${mode} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_install.sh ${mode})
  set_tests_properties(install_${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "SRN_BUILD=${CMAKE_BINARY_DIR};SRN_SRC=${CMAKE_SOURCE_DIR}"
    LABELS e2e
    # cpack first brings the build up to date; never while another of
    # these copies the libraries out of it.
    RESOURCE_LOCK srn_install_from_build)
endforeach()
