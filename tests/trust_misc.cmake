# Issue 10, the smaller trust boundaries: trace files and the config file
# against another local user, and fuzzing of the environment parsers.

# SOFTRNIC_PCAP: an attacker's symlink, file or FIFO at the trace path.
srn_script_test(test_trust_misc_pcap test_trust_misc_pcap.sh)

# SOFTRNIC_CONFIG: /dev/zero, a FIFO, a directory, a huge or binary file.
srn_script_test(test_trust_misc_config test_trust_misc_config.sh)

# The environment parsers under the fuzz driver (CTest, every build); with
# Clang also under libFuzzer (fuzz_*_libfuzzer, by hand).
set(SRN_FUZZ_DATA ${CMAKE_CURRENT_LIST_DIR}/data/fuzz)
srn_fuzz_target(fuzz_config RUNS 100000 SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz_config.c
  SEEDS ${SRN_FUZZ_DATA}/config/auto.txt ${SRN_FUZZ_DATA}/config/file.txt
        ${SRN_FUZZ_DATA}/config/entries.txt)
srn_fuzz_target(fuzz_faults RUNS 200000 SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz_faults.c
  SEEDS ${SRN_FUZZ_DATA}/faults/rates.txt ${SRN_FUZZ_DATA}/faults/filters.txt)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_trust_misc_config fuzz_config fuzz_faults
  APPEND PROPERTY LABELS fast)
