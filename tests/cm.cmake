# Connection manager (librdmacm.so.1): codec, fuzzing, unmodified rdmacm-utils.
srn_unit_test(test_cm_mad test_cm_mad.c ${CMAKE_SOURCE_DIR}/src/cm/mad.c)
srn_fuzz_target(fuzz_cm_mad RUNS 50000 SOURCES fuzz_cm_mad.c ${CMAKE_SOURCE_DIR}/src/cm/mad.c)
srn_script_test(cm_symbols test_cm_symbols.sh)
srn_script_test(cm_rdmacm_utils test_cm_rdmacm_utils.sh)
