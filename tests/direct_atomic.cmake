# Same-host direct atomics (issue 14: core/mr_share.c, transport/direct.c).
# test_direct_atomic runs two processes through the public verbs API; the
# script runs each mode with direct placement on and off and checks the
# direct_atomic counter says which path ran.
add_executable(test_direct_atomic test_direct_atomic.c helpers/rc_test_conn.c)
target_link_libraries(test_direct_atomic PRIVATE softrnic)
target_include_directories(test_direct_atomic PRIVATE ${IBVERBS_INCLUDE})
srn_script_test(direct_atomic test_direct_atomic.sh)

# The page move itself, with a thread of the program writing the pages
# that move: no write lost (userfaultfd write-protects them meanwhile).
# In the tsan label too: the writer and the move race by design.
srn_unit_test(test_mr_share_writers test_mr_share_writers.c helpers/rc_test_conn.c)
set_property(TEST test_mr_share_writers APPEND PROPERTY LABELS fast tsan)
# The pages come back to private memory at dereg: fork and mremap after.
# Not under ThreadSanitizer: its mremap interceptor does not move the
# shadow of a grown mapping (SEGV in the runtime), and no threads race here.
srn_unit_test(test_mr_share_release test_mr_share_release.c helpers/rc_test_conn.c)
set_property(TEST test_mr_share_release APPEND PROPERTY LABELS fast)
# Registered memory grown (realloc, mremap) and forked while its pages are
# on the memfd (issue 27): no SIGBUS, no SIGSEGV in the child, no sharing.
srn_unit_test(test_mr_grow_fork test_mr_grow_fork.c helpers/rc_test_conn.c)
set_property(TEST test_mr_grow_fork APPEND PROPERTY LABELS fast)
# The same with a same-host peer streaming Writes at the region meanwhile.
srn_unit_test(test_mr_fork_peer test_mr_fork_peer.c helpers/rc_test_conn.c)
set_property(TEST test_mr_fork_peer APPEND PROPERTY LABELS fast)
# A buffer on the registering thread's own stack never moves: the move
# write-protects it and that thread's next call hung on it (issue 29).
srn_unit_test(test_mr_share_own_stack test_mr_share_own_stack.c helpers/rc_test_conn.c)
set_property(TEST test_mr_share_own_stack APPEND PROPERTY LABELS fast tsan)
