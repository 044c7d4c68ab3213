# cmake/install.cmake - `cmake --install` and the .deb (cpack -G DEB).
#
# Layout under the prefix:
#   bin/softrnic                 the command; `softrnic run` finds the
#                                libraries next to it (tools/cmd_run.c)
#   lib/softrnic/libibverbs.so.1, librdmacm.so.1, libsoftrnic.so.0
#                                a folder of their own: no loader searches it
#                                unless told, so installing softrnic never
#                                shadows the system's rdma-core by accident
# No development symlinks (libibverbs.so): programs compile against
# rdma-core's headers and libraries and run on softrnic unmodified.
set(SRN_INSTALL_LIBDIR lib/softrnic CACHE STRING
    "Where softrnic's libraries go below the prefix (`softrnic run` looks in lib/softrnic)")

# The command finds libsoftrnic.so.0 relative to itself, and librdmacm.so.1
# finds our libibverbs.so.1 beside it even without LD_LIBRARY_PATH.
set_target_properties(softrnic-tool PROPERTIES INSTALL_RPATH "$ORIGIN/../${SRN_INSTALL_LIBDIR}")
set_target_properties(rdmacm PROPERTIES INSTALL_RPATH "$ORIGIN")

install(TARGETS softrnic ibverbs rdmacm
        LIBRARY DESTINATION ${SRN_INSTALL_LIBDIR} NAMELINK_SKIP)
install(TARGETS softrnic-tool RUNTIME DESTINATION bin)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/docs/DESIGN.md
        DESTINATION share/doc/softrnic)

# cpack -G DEB (from the build directory): /usr/bin/softrnic and
# /usr/lib/softrnic/. Depends come from dpkg-shlibdeps (libc6, libisal2).
set(CPACK_PACKAGE_NAME softrnic)
set(CPACK_PACKAGE_VENDOR "softrnic")
set(CPACK_PACKAGE_CONTACT "softrnic developers <softrnic@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "user-space RDMA NIC: verbs and rdma_cm programs run unmodified over RoCEv2/UDP")
set(CPACK_PACKAGE_DESCRIPTION
    "softrnic is an RDMA NIC written in software. `softrnic run -- PROG` runs an\n unmodified verbs, rdma_cm, UCX or libfabric program on it, with no RDMA\n hardware, kernel module or root. Its libraries live in /usr/lib/softrnic\n and never replace the system's rdma-core.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Our own libraries satisfy each other: dpkg-shlibdeps looks for them here.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/lib)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ibverbs-utils, rdmacm-utils")
include(CPack)
