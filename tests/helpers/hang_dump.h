/*
 * hang_dump.h - a test that hangs says where.
 *
 * ctest reports a hung test as a bare "Timeout" with whatever the test
 * printed, which for a quiet test is nothing.  srn_hang_dump_arm(s)
 * starts a watchdog thread: if the process still runs s seconds later it
 * prints the last stage the test named and every thread's stack (gdb
 * -batch, when installed and ptrace is allowed), then exits 124.  Arm it
 * below the test's ctest TIMEOUT.
 *
 * The watchdog thread blocks every signal, so it never takes one the
 * test meant for its own threads.
 */
#ifndef SRN_TESTS_HANG_DUMP_H
#define SRN_TESTS_HANG_DUMP_H

/* Start the watchdog (once per process; later calls only move the
 * deadline). */
void srn_hang_dump_arm(unsigned seconds);

/* Name the stage the test is in; the watchdog prints the last one.
 * NAME must stay valid (a string literal). */
void srn_hang_dump_stage(const char *name);

#endif
