# Tests of the `softrnic` tool, and of unmodified Debian verbs utilities
# (ibverbs-utils) running on softrnic through `softrnic run`.
srn_script_test(tool_devinfo test_tool_devinfo.sh)
srn_script_test(ibv_devices test_ibv_devices.sh)
srn_script_test(ibv_devinfo test_ibv_devinfo.sh)

# Each runs a handful of short commands; a hang is a bug, not slowness.
set_tests_properties(tool_devinfo ibv_devices ibv_devinfo PROPERTIES TIMEOUT 120)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST tool_devinfo ibv_devices ibv_devinfo
  APPEND PROPERTY LABELS fast)
