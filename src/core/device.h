/*
 * device.h - devices and open contexts.
 *
 * A device is configured, not discovered (link/config.c).  The device list
 * is built once per process; each srn_device stays alive until exit so the
 * pointers handed out by ibv_get_device_list remain valid.  The runtime
 * engine (socket, tables, progress thread) is the srn_nic, created on the
 * first ibv_open_device of a device and destroyed on its last close: every
 * context of one device in one process shares one nic, because they share
 * one UDP address and one QP number space.
 */
#ifndef SRN_CORE_DEVICE_H
#define SRN_CORE_DEVICE_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>

#include "core/async.h"
#include "link/config.h"

struct srn_nic;

struct srn_device {
	struct ibv_device ibdev;
	struct srn_dev_cfg cfg;
	int index;
	uint64_t guid;                 /* network order, as ibv_get_device_guid returns */
	pthread_mutex_t open_lock;     /* guards nic and open_count */
	int open_count;
	struct srn_nic *nic;
	/* The open contexts, for device-wide async events.  A leaf lock:
	 * never held while a thread is joined or nic->lock is taken. */
	pthread_mutex_t ctx_lock;
	struct srn_context *contexts;
	const struct srn_nic *fatal_nic; /* its progress thread stopped (srn_device_fatal) */
};

struct srn_context {
	struct verbs_context vctx;     /* vctx.context is the ibv_context handed out */
	struct srn_device *dev;
	struct srn_nic *nic;
	struct srn_async async;
	struct srn_context *next;      /* dev->contexts, under dev->ctx_lock */
};

static inline struct srn_context *srn_ctx(struct ibv_context *c)
{
	return (struct srn_context *)((char *)c - __builtin_offsetof(struct srn_context, vctx.context));
}

static inline struct srn_device *srn_dev(struct ibv_device *d)
{
	return (struct srn_device *)d;
}

/* The process-wide device table; built on first use (thread safe). */
int srn_devices_get(struct srn_device ***list, int *count);
struct srn_device *srn_device_from_ibdev(struct ibv_device *d); /* NULL if not ours */

/* The devices built so far, without building them (the engine's exit
 * hook): returns how many. */
int srn_devices_built(struct srn_device ***list);

/* Fill device/port attributes from the device and its nic. */
void srn_device_query(struct srn_device *dev, struct ibv_device_attr *attr);
void srn_port_query(struct srn_device *dev, struct ibv_port_attr *attr);

/* Open contexts: add once ctx->nic is set and the context can take
 * events, remove before its async queue is destroyed. */
void srn_device_ctx_add(struct srn_device *dev, struct srn_context *ctx);
void srn_device_ctx_del(struct srn_device *dev, struct srn_context *ctx);
/* nic (the device's engine) can no longer make progress on its own:
 * every context open on it, and every one opened on it later, gets
 * IBV_EVENT_DEVICE_FATAL, as from a NIC whose firmware died.  Any
 * thread; takes only leaf locks. */
void srn_device_fatal(struct srn_device *dev, const struct srn_nic *nic);

#endif
