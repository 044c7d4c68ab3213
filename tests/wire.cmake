# Tests of the wire/ layer (headers, opcode table, ICRC).  Pure functions:
# no sockets, no threads.  The frame vectors are docs/roce-wire.md §4.3.
set(SRN_WIRE_TSV ${SRN_TESTDATA}/roce-frames.tsv)

srn_unit_test(test_wire_icrc test_wire_icrc.c test_wire_util.c)
# zlib's byte-table CRC32 is the independent reference for ISA-L's SIMD one.
find_package(ZLIB REQUIRED)
target_link_libraries(test_wire_icrc PRIVATE ZLIB::ZLIB)
srn_unit_test(test_wire_pkt test_wire_pkt.c test_wire_util.c)
srn_unit_test(test_wire_robust test_wire_robust.c test_wire_util.c)

# srn_unit_test runs the program without arguments, so the vector file is
# also compiled in as the default; argv[1] overrides it.
foreach(t test_wire_icrc test_wire_pkt)
  target_compile_definitions(${t} PRIVATE SRN_FRAMES_TSV="${SRN_WIRE_TSV}")
endforeach()

# libFuzzer harness for srn_pkt_parse: built with Clang only, never run by
# ctest.  It compiles the parser sources itself so they carry the fuzzer's
# coverage instrumentation.
if(CMAKE_C_COMPILER_ID STREQUAL "Clang")
  add_executable(fuzz_pkt_parse fuzz_pkt_parse.c
                 ${CMAKE_SOURCE_DIR}/src/wire/pkt.c
                 ${CMAKE_SOURCE_DIR}/src/wire/opcode.c)
  target_include_directories(fuzz_pkt_parse PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_compile_definitions(fuzz_pkt_parse PRIVATE _GNU_SOURCE)
  target_compile_options(fuzz_pkt_parse PRIVATE
                         -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_pkt_parse PRIVATE
                      -fsanitize=fuzzer,address,undefined)
endif()
