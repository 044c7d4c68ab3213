/*
 * visibility.h - SRN_EXPORT, the mark of an exported entry point.
 *
 * The library is compiled with -fvisibility=hidden, so a function is
 * exported only if it carries SRN_EXPORT *and* its name is listed in a
 * node of src/abi/libibverbs.map (which ends in "local: *").  The working
 * verbs (here) and the ABI shim (src/abi/, above this layer) both use it;
 * the shim's versioned aliases (SRN_COMPAT) live in abi/export.h.
 */
#ifndef SRN_VERBS_VISIBILITY_H
#define SRN_VERBS_VISIBILITY_H

#define SRN_EXPORT __attribute__((visibility("default")))

#endif /* SRN_VERBS_VISIBILITY_H */
