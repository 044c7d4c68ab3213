# Issue 10, the smaller trust boundaries: trace files and the config file
# against another local user, and fuzzing of the environment parsers.

# SOFTRNIC_PCAP: an attacker's symlink, file or FIFO at the trace path.
srn_script_test(test_trust_misc_pcap test_trust_misc_pcap.sh)

# SOFTRNIC_CONFIG: /dev/zero, a FIFO, a directory, a huge or binary file.
srn_script_test(test_trust_misc_config test_trust_misc_config.sh)
