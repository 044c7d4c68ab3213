/*
 * ports.h - the rdma_cm ports ids hold and listen on: the kernel's port
 * rules within this process, the port files that carry them across this
 * user's processes, and which listener takes a request (ports.c).  Must
 * hold srn_cm.lock.
 */
#ifndef SRN_CM_PORTS_H
#define SRN_CM_PORTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <rdma/rdma_cma.h>

#include "cm/cm_id.h"
#include "cm/mad.h"

struct srn_cm_dev;

uint16_t srn_cm_id_port(const struct srn_cm_id *id);
int srn_cm_port_alloc(struct srn_cm_id *id, struct sockaddr *a);
bool srn_cm_port_in_use(enum rdma_port_space ps, const struct sockaddr *a, const struct srn_cm_id *except);
/* rdma_listen on a bound id: may it listen?  0, -EADDRINUSE, -EADDRNOTAVAIL. */
int srn_cm_listen_check(struct srn_cm_id *id);

/* Another id's hold on a port, as the kernel's port check sees it. */
struct srn_cm_binding {
	struct sockaddr_storage addr;
	bool reuseaddr, afonly;
};
/* May address a (with the caller's reuseaddr and afonly) share a port with
 * cur?  The kernel's cma_check_port: both reuseaddr, or both afonly in
 * two families: yes (0); either a wildcard: -EADDRNOTAVAIL; the same
 * address: -EADDRINUSE; else 0. */
int srn_cm_port_rule(const struct sockaddr *a, bool reuse, bool afonly, const struct srn_cm_binding *cur);

/* The port files: explicit ports across this user's processes.  Reserve
 * the id's bound port (listen: again, now without reuseaddr): 0 or what
 * srn_cm_port_rule says about another live process's hold. */
int srn_cm_port_reserve(struct srn_cm_id *id, bool listen);
/* Pick an ephemeral port for a (its address set, port 0) that neither
 * this process's ids nor another process's files hold, and write it down;
 * sets a's port.  0 or -EADDRNOTAVAIL (the range is full). */
int srn_cm_port_ephemeral(struct srn_cm_id *id, struct sockaddr *a);
void srn_cm_port_release(struct srn_cm_id *id);

struct srn_cm_id *srn_cm_listener_for(uint64_t service_id, const struct sockaddr *dst);
/* Which listener takes a request (REQ or SIDR_REQ) for service_id on dev,
 * whose private data starts with the CM header (parsed into h)?  0 and
 * *out; -ENOENT: no such service here; -EINVAL: a bad header; -ENOBUFS:
 * the listener's backlog is full. */
int srn_cm_listener_take(struct srn_cm_dev *dev, uint64_t service_id, const uint8_t *pdata, size_t len,
			 struct srn_cma_hdr *h, struct srn_cm_id **out);

/* The live process that holds the port a REQ or SIDR_REQ (the MAD) asks
 * for, on its destination address or a wildcard; 0 when none.  Reads the
 * port files only, with no lock: the link calls it from any thread to
 * route a request to the process behind a shared address that listens
 * (link/udp_group.h, srn_udp_group_set_gsi). */
long srn_cm_port_holder(const uint8_t *mad, size_t len);
/* The same for a request's service ID and private data (held.c). */
long srn_cm_port_holder_sid(uint64_t sid, const uint8_t *pdata, size_t plen);

#endif
