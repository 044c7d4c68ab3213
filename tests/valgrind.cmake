# Debuggers (issue 23): Debian's unmodified programs on softrnic under
# valgrind's memcheck, both processes of each pair, with no error reported
# (tests/data/valgrind.supp names the programs' own faults); skipped in the
# sanitizer builds, which valgrind cannot run.  `ctest -L valgrind` runs it.
srn_script_test(valgrind_memcheck test_valgrind.sh LABELS "e2e;valgrind")
# gdb names softrnic's threads (srn-progress, srn-cm).
srn_script_test(gdb_threads test_gdb_threads.sh)
