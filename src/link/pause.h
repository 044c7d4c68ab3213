/*
 * pause.h - PFC-style pause for the UDP link, emulated through a shared
 * file instead of Ethernet pause frames.
 *
 * A real NIC's MAC sees 802.1Qbb frames from its switch and stops
 * transmitting for the quanta they carry.  softrnic has no packet socket
 * (that needs CAP_NET_RAW), so the emulated switch (`softrnic switch
 * --pause-dir DIR`) still sends the real PFC frames, for traces and
 * operators, and also publishes the pause state of each of its ingress
 * ports in a small file DIR/PORT.pause: the stand-in for the link between
 * that port and the sender.  A process started with
 * SOFTRNIC_PAUSE_FILE=DIR/PORT.pause holds its UDP transmissions while the
 * record says paused, as if the frames had reached its MAC.
 *
 * Trust: a pause may only come from the switch the user set up.  The file
 * is named explicitly by the environment (never discovered); it must be a
 * regular file owned by this process's effective uid or by root, writable
 * by its owner alone, with our magic and version: anything else is refused
 * with a message and no pause is ever honoured.  The record is still
 * untrusted memory: a pause lasts at most its lease (until_ns), and a lease
 * longer than SRN_PAUSE_MAX_LEASE_NS from its last refresh (set_ns) is cut
 * to that, so a stuck or dead writer stalls us for one lease, never
 * forever.
 *
 * The record: one writer (the switch), a sequence counter odd while it
 * writes; readers retry a bounded number of times and keep their last
 * view when they cannot get a stable one.  Times are CLOCK_MONOTONIC
 * nanoseconds, one clock for every network namespace of a host.
 */
#ifndef SRN_LINK_PAUSE_H
#define SRN_LINK_PAUSE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag/counters.h"

#define SRN_PAUSE_MAGIC 0x504e5253u	/* "SRNP" little-endian */
#define SRN_PAUSE_VERSION 1u
#define SRN_PAUSE_ENV "SOFTRNIC_PAUSE_FILE"
/* The longest pause one refresh may announce: 0xffff quanta of 512 bit
 * times at 100 Mb/s is 335 ms; a second covers slower emulated ports. */
#define SRN_PAUSE_MAX_LEASE_NS 1000000000ull

struct srn_pause_rec {
	uint32_t magic, version;
	_Atomic uint32_t seq;		/* odd while the writer updates */
	uint32_t reserved;
	_Atomic uint64_t gen;		/* pauses started since the file was made */
	_Atomic uint64_t until_ns;	/* 0: not paused; else paused until then */
	_Atomic uint64_t start_ns;	/* when the pause in progress began */
	_Atomic uint64_t done_ns;	/* total length of the pauses that ended */
	_Atomic uint64_t set_ns;	/* when until_ns was last written */
};

/* A consistent copy of the record. */
struct srn_pause_snap {
	uint64_t gen, until_ns, start_ns, done_ns, set_ns;
};

/* What one transmit side has seen and counted (zeroed = nothing yet). */
struct srn_pause_view {
	bool started;
	uint64_t gen_seen;		/* counted into rx_pause up to here */
	uint64_t us_seen;		/* counted into rx_pause_duration up to here */
};

/* Copy rec consistently: true, or false after a bounded number of tries
 * against a writer mid-update. */
bool srn_pause_read(const struct srn_pause_rec *rec, struct srn_pause_snap *s);
/* Is the link paused at now (a lease cut to SRN_PAUSE_MAX_LEASE_NS)? */
bool srn_pause_active(const struct srn_pause_snap *s, uint64_t now_ns);
/* Pause time up to now, the running pause included (up to its lease). */
uint64_t srn_pause_total_ns(const struct srn_pause_snap *s, uint64_t now_ns);

/* Open and check a pause file: the mapped record (read-only) or NULL with
 * a sentence in err.  The caller munmaps sizeof(struct srn_pause_rec). */
const struct srn_pause_rec *srn_pause_map(const char *path, char *err, size_t errlen);

/* The egress hook: true while SOFTRNIC_PAUSE_FILE says this host's link
 * is paused (the caller holds the packet back: -EAGAIN).  Counts
 * rx_pause and rx_pause_duration (us) into cnt as it sees them.  Without
 * SOFTRNIC_PAUSE_FILE: one load and false. */
bool srn_pause_hold(struct srn_pause_view *v, struct srn_counters *cnt);

#endif
