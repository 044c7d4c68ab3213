# Issue 10, items 11-15: verbs corners found by rdma-core's own tests.
# srn_trust_verbs_test(name [ARGS args...] SOURCES extra.c...): the program
# tests/<prog>.c run as CTest test <name>.
function(srn_trust_verbs_test name prog)
  cmake_parse_arguments(T "" "" "ARGS;SOURCES;LABELS" ${ARGN})
  if(NOT T_LABELS)
    set(T_LABELS e2e)
  endif()
  if(NOT TARGET ${prog})
    add_executable(${prog} ${CMAKE_CURRENT_LIST_DIR}/${prog}.c
      ${CMAKE_CURRENT_LIST_DIR}/helpers/rc_test_conn.c ${T_SOURCES})
    target_link_libraries(${prog} PRIVATE softrnic Threads::Threads)
    target_include_directories(${prog} PRIVATE ${IBVERBS_INCLUDE})
  endif()
  add_test(NAME ${name} COMMAND ${prog} ${T_ARGS})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
    LABELS "${T_LABELS}")
endfunction()

# Item 11: other verbs inside an ibv_wr_* batch, same thread and another
# thread (also in scripts/test.sh's TSan list).
srn_trust_verbs_test(test_trust_verbs_wr_batch test_trust_verbs_wr_batch
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/helpers/test_trust_verbs_peer.c)

# Item 12: memory windows bound with LOCAL_WRITE in their rights, as
# rdma-core's tests bind them (type 1, ibv_wr_bind_mw, IBV_WR_BIND_MW).
srn_trust_verbs_test(test_trust_verbs_mw test_trust_verbs_mw
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/helpers/test_trust_verbs_peer.c)

# Item 14: create_flags 0 accepted.  Item 15: cmd_fd a real descriptor,
# closed with the context, that ibv_import_device refuses (EOPNOTSUPP).
srn_trust_verbs_test(test_trust_verbs_create_flags test_trust_verbs_dev ARGS create_flags
  LABELS unit)
srn_trust_verbs_test(test_trust_verbs_cmd_fd test_trust_verbs_dev ARGS fds LABELS unit)

# scripts/test.sh runs these under ThreadSanitizer (-L tsan).
set_property(TEST test_trust_verbs_wr_batch APPEND PROPERTY LABELS tsan)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_trust_verbs_wr_batch test_trust_verbs_mw
  test_trust_verbs_create_flags test_trust_verbs_cmd_fd
  APPEND PROPERTY LABELS fast)
