/*
 * switch_pause.h - the switch's side of the emulated PFC pause: one pause
 * record per ingress port (src/link/pause.h), in a directory the user
 * names with --pause-dir, that softrnic senders behind that port read
 * through SOFTRNIC_PAUSE_FILE.  The switch still sends the real 802.1Qbb
 * frames; the record is what a softrnic sender, which cannot see them
 * without CAP_NET_RAW, honours instead.
 *
 * One writer per record (the switch loop).  Files are created exclusively,
 * mode 0600 (root's switch: root's senders read them; a switch of user U:
 * U's senders), and unlinked at close.
 */
#ifndef SRN_TOOLS_SWITCH_PAUSE_H
#define SRN_TOOLS_SWITCH_PAUSE_H

#include <stdbool.h>
#include <stdint.h>

#include "link/pause.h"

struct srn_swp {
	struct srn_pause_rec *rec;	/* mapped read-write */
	char path[512];
	bool paused;
};

/* Create dir/port.pause and map it: 0 or -errno. */
int srn_swp_open(struct srn_swp *p, const char *dir, const char *port);
/* Announce or extend a pause until now + lease_ns. */
void srn_swp_pause(struct srn_swp *p, uint64_t now_ns, uint64_t lease_ns);
/* End the pause. */
void srn_swp_resume(struct srn_swp *p, uint64_t now_ns);
/* Resume, unmap, unlink. */
void srn_swp_close(struct srn_swp *p);

#endif
