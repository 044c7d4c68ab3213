/* run_ns.h - the private /dev and /sys/class view of `softrnic run`
 * (run_ns.c). */
#ifndef SRN_TOOLS_RUN_NS_H
#define SRN_TOOLS_RUN_NS_H

/* Move this process into a private mount namespace (and user namespace,
 * when not privileged) where /dev/infiniband/uverbsN and
 * /sys/class/infiniband/<name> describe softrnic's devices. On failure
 * prints one warning on stderr, leaves the process's view of /dev and
 * /sys as it was, and returns -errno; the caller runs the program anyway. */
int srn_run_ns_setup(void);

#endif
