# The restructuring (issue 11) changes no behaviour: the whole suite is its
# guard.  What it adds: `softrnic devinfo` reading the configuration with
# the library's own parser, checked here for a SOFTRNIC_CONFIG file.
srn_script_test(devinfo_config_file test_devinfo_config_file.sh)
