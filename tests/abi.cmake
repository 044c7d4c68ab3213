# The libibverbs ABI surface: symbol versions, compat and private entry
# points, device-free utility verbs, and unmodified binaries starting on it.
srn_unit_test(test_util_verbs test_util_verbs.c)
srn_script_test(test_abi_symbols test_abi_symbols.sh)
srn_script_test(test_utils_start test_utils_start.sh)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_util_verbs test_abi_symbols test_utils_start
  APPEND PROPERTY LABELS fast)
