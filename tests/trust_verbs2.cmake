# Issue 10, item 11, second review: the edges of an ibv_wr_* batch that
# holds only its QP's send-queue lock.  srn_trust_verbs_test comes from
# trust_verbs.cmake, which the sorted glob of tests/CMakeLists.txt reads
# before this file.

# An XRC receive QP gets no send_ops_flags (EOPNOTSUPP, as rxe and mlx5):
# it has no send queue and no send CQ to complete into.
srn_trust_verbs_test(test_trust_verbs2_xrc_recv test_trust_verbs2_xrc
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/helpers/test_trust_verbs_peer.c LABELS unit)

# Batch edges (also in scripts/test.sh's TSan list): a reset under the
# batch, complete/abort without an open batch or from another thread,
# destroy while a batch is open.
foreach(mode reset abort thread destroy)
  srn_trust_verbs_test(test_trust_verbs2_${mode} test_trust_verbs2_batch ARGS ${mode}
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/helpers/test_trust_verbs_peer.c)
endforeach()

# scripts/test.sh runs these under ThreadSanitizer (-L tsan).
set_property(TEST test_trust_verbs2_reset test_trust_verbs2_abort
  test_trust_verbs2_thread test_trust_verbs2_destroy APPEND PROPERTY LABELS tsan)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_trust_verbs2_xrc_recv test_trust_verbs2_reset
  test_trust_verbs2_abort test_trust_verbs2_thread test_trust_verbs2_destroy
  APPEND PROPERTY LABELS fast)
