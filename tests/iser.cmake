# Storage software on softrnic (issue 23): Debian's tgt (tgtd, iSER
# target) and libiscsi (iSER initiator: its tools and iser_rw, a small
# writer/reader of our own) between two network namespaces, with and
# without injected faults.  test_iser_tgt.sh skips without root, tgt or
# libiscsi-bin, but fails if those are there and iser_rw is not (libiscsi-dev
# missing when cmake ran): CI installs all three.
find_path(ISCSI_INCLUDE iscsi/iscsi.h)
find_library(ISCSI_LIB iscsi)
find_path(RDMA_CMA_INCLUDE rdma/rdma_cma.h)
if(ISCSI_INCLUDE AND ISCSI_LIB AND RDMA_CMA_INCLUDE)
  add_executable(iser_rw ${CMAKE_CURRENT_LIST_DIR}/helpers/iser_rw.c)
  target_include_directories(iser_rw PRIVATE ${ISCSI_INCLUDE} ${RDMA_CMA_INCLUDE})
  # dlsym; -rdynamic keeps iser_rw's rdma_resolve_route (see helpers/iser_rw.c)
  # in its dynamic symbol table, where libiscsi's call finds it.
  target_link_libraries(iser_rw PRIVATE ${ISCSI_LIB} ${CMAKE_DL_LIBS})
  set_target_properties(iser_rw PROPERTIES ENABLE_EXPORTS ON)
else()
  message(STATUS "libiscsi-dev not found: iser_rw not built (the iser_tgt test fails where "
                 "tgt and libiscsi-bin are installed)")
endif()
srn_script_test(iser_tgt test_iser_tgt.sh)
