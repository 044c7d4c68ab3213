# Another user creates our per-user names first (issue 26, item 4;
# link/rundir.h): the group directory, the rdma_cm port directory, the
# inbox locators and `softrnic run`'s marker each fall back, say so, and
# the workload still runs.  Each in a throwaway network namespace, as
# root playing uid 65534 (tests/lib/squat.sh); skipped otherwise.
srn_script_test(test_trust_squat_grp test_trust_squat_grp.sh)
srn_script_test(test_trust_squat_cm test_trust_squat_cm.sh)
srn_script_test(test_trust_squat_link test_trust_squat_link.sh)
srn_script_test(test_trust_squat_run test_trust_squat_run.sh)

# Per-namespace state goes with its last user, or with the next user
# after a kill (issue 26, item 5).
srn_script_test(test_rundir_cleanup test_rundir_cleanup.sh)

# The fast tier (each under ~5 s; ctest -L fast).
set_property(TEST test_trust_squat_grp test_trust_squat_cm test_trust_squat_link
             test_trust_squat_run APPEND PROPERTY LABELS fast)

# The module's rules one by one: name 0, the hold, forked children, a
# squat, the sweep of a dead namespace's directory (root; else skipped).
srn_unit_test(test_rundir ${CMAKE_CURRENT_LIST_DIR}/test_rundir.c)
set_property(TEST test_rundir APPEND PROPERTY LABELS fast)
