/*
 * export.h - marking the libibverbs ABI surface (the shim's part).
 *
 * SRN_EXPORT (verbs/visibility.h) exports a name listed in a node of
 * src/abi/libibverbs.map, the map that ends in "local: *".
 *
 * SRN_COMPAT(name, node) attaches an extra, non-default version of a
 * public name to a function with a different internal name: the object
 * file gets the symbol "name@node" (single @: not the default binding, the
 * way objdump shows "(IBVERBS_1.0)"), so binaries linked long ago against
 * that node still resolve, while new links bind to name@@<default node>
 * defined elsewhere.  The internal name must also be SRN_EXPORT (a hidden
 * symbol would make its alias local); the map's "local: *" keeps the
 * internal name itself out of the dynamic symbol table.
 */
#ifndef SRN_ABI_EXPORT_H
#define SRN_ABI_EXPORT_H

#include "verbs/visibility.h"

/* Needs GCC >= 10 (the symver attribute); Debian 12 ships GCC 12. */
#define SRN_COMPAT(name, node) \
	SRN_EXPORT __attribute__((symver(#name "@" #node)))

#endif /* SRN_ABI_EXPORT_H */
