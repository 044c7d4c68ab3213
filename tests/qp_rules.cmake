# QP modify rules: the state/attribute table (pure) and an end-to-end walk of
# every transition through the public verbs API of libsoftrnic.
srn_unit_test(test_qp_rules test_qp_rules.c)

# Linked with the shared library, as a verbs program would be.  The rules
# table is compiled in (the library hides its copy) to know which
# transitions are legal; test_qp_rules checks that table on its own.
add_executable(test_qp_state_walk test_qp_state_walk.c
               ${CMAKE_SOURCE_DIR}/src/core/qp_rules.c)
target_link_libraries(test_qp_state_walk PRIVATE softrnic)
target_include_directories(test_qp_state_walk PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_compile_definitions(test_qp_state_walk PRIVATE _GNU_SOURCE)
add_test(NAME test_qp_state_walk COMMAND test_qp_state_walk)
set_tests_properties(test_qp_state_walk PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
  LABELS unit)
# engine/progress.c settings from the environment.
srn_unit_test(test_core_spin_env test_core_spin_env.c)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_qp_rules test_qp_state_walk test_core_spin_env
  APPEND PROPERTY LABELS fast)
