/*
 * nic.c - the life of a device's engine: creating and destroying the nic
 * on the first open and last close of its device, the flush at process
 * exit, and the one way out of nic->lock (srn_nic_unlock), which sends
 * what the transport queued.
 */
#include "engine/nic.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/device.h"
#include "core/mcast.h"
#include "core/qp.h"
#include "link/egress.h"
#include "link/gso.h"
#include "link/pcap.h"
#include "transport/cc.h"
#include "transport/tx.h"
#include "transport/txq.h"

static void stats_at_exit(struct srn_nic *nic)
{
	const char *s = getenv("SOFTRNIC_STATS");
	if (s && *s && strcmp(s, "0") != 0)
		srn_counters_dump(nic->diag.cnt, nic->cfg.name, STDERR_FILENO);
}

/* UDP GRO and its receive batch, when the socket takes it; without
 * either the plain receive path serves. */
static void nic_gro_open(struct srn_nic *nic)
{
	if (srn_udp_enable_gro(&nic->link.udp)) {
		nic->link.gro = calloc(1, sizeof(*nic->link.gro));
		if (!nic->link.gro || srn_gro_batch_init(nic->link.gro)) {
			free(nic->link.gro);
			nic->link.gro = NULL;
		}
	}
}

/* The same-host inbox and direct placement, as far as the environment
 * and the fault injector allow; each may fail and leave the socket. */
static void nic_rings_open(struct srn_nic *nic)
{
	/* Same-host rings bypass the fault injector, so with one every
	 * packet stays on the socket where it acts.  The trace records ring
	 * traffic too (link/egress.c, transport/rx.c). */
	const char *shm_env = getenv("SOFTRNIC_SHM");
	bool shm_on = !nic->link.udp.fault && !(shm_env && !strcmp(shm_env, "0"));
	/* Direct placement (link/direct.h) rides on the rings' discovery and
	 * trust checks, so it is off with them (a fault injector: every
	 * packet must meet it), and with SOFTRNIC_DIRECT=0.  A packet trace
	 * keeps it: the requester records the packets each direct operation
	 * stands for (transport/direct_trace.h). */
	const char *direct_env = getenv("SOFTRNIC_DIRECT");
	nic->link.direct_on = shm_on && !(direct_env && !strcmp(direct_env, "0"));
	const char *map_env = getenv("SOFTRNIC_DIRECT_MAP");
	nic->link.direct_map_on = !(map_env && !strcmp(map_env, "0"));
	nic->link.direct.fd = -1;
	if (nic->link.direct_on && srn_direct_own_open(&nic->link.direct))
		nic->link.direct_on = false;
	if (srn_shm_open(&nic->link.shm, (const struct sockaddr *)&nic->link.udp.local,
			 nic->link.udp.local_len, srn_udp_member(&nic->link.udp), shm_on,
			 nic->link.direct.fd))
		nic->link.shm.in = NULL;     /* sends may still use peers' inboxes */
	if (nic->link.shm.in)
		srn_direct_own_publish(&nic->link.direct, nic->link.shm.in_cookie);
}

int srn_nic_create(struct srn_device *dev, struct srn_nic **out, char *err, size_t errlen)
{
	struct srn_nic *nic = calloc(1, sizeof(*nic));
	if (!nic)
		return -ENOMEM;
	nic->dev = dev;
	nic->cfg = dev->cfg;
	pthread_mutex_init(&nic->lock, NULL);
	nic->engine.kick_fd = nic->engine.ep_all = nic->engine.ep_kick = nic->engine.bell_fd =
		nic->engine.ring_bell_fd = nic->engine.ep_wait = -1;
	nic->pid = getpid();

	int ret = srn_udp_open(&nic->link.udp, &nic->cfg, err, errlen);
	if (ret) {
		free(nic);
		return ret;
	}
	ret = srn_rx_batch_init(&nic->link.rx);
	if (ret)
		goto fail;
	ret = srn_cc_dev_open(nic, err, errlen);     /* SOFTRNIC_DCQCN_*: a typo fails the open */
	if (ret)
		goto fail;
	/* GSO/GRO batch packets below the link layer's per-packet hooks, so
	 * with a fault injector or a packet trace every packet goes alone. */
	bool gso = !nic->link.udp.hooked && !getenv("SOFTRNIC_NO_GSO");
	if (gso)
		nic_gro_open(nic);
	nic->engine.bg_spin_ns = srn_progress_spin_ns(getenv("SOFTRNIC_SPIN_US"));
	nic_rings_open(nic);
	srn_sockaddr_to_gid((const struct sockaddr *)&nic->cfg.addr, nic->gid);
	nic->ib_mtu = srn_link_ib_mtu(nic->cfg.link_mtu);
	nic->diag.seg = srn_diag_create(nic->cfg.name, nic->gid, err, errlen);
	if (!nic->diag.seg) {
		ret = -ENOMEM;
		goto fail;
	}
	nic->diag.cnt = srn_diag_counters(nic->diag.seg);
	nic->diag.busy = &srn_diag_seg(nic->diag.seg)->hdr.busy;
	nic->link.egress = srn_egress_create(&nic->link.udp, &nic->link.shm, nic->diag.cnt, gso);
	if (!nic->link.egress) {
		ret = -ENOMEM;
		goto fail;
	}
	/* A name another user holds, or no inbox at all: said once. */
	if (nic->link.shm.note[0])
		srn_diag_dev_log(nic->diag.seg, SRN_LOG_WARN, "%s", nic->link.shm.note);
	/* The group directory's name another user took (link/rundir.h). */
	if (nic->link.udp.dir_note)
		srn_diag_dev_log(nic->diag.seg, SRN_LOG_WARN, "%s", nic->link.udp.dir_note);
	/* Start QP numbers at a time-dependent generation so a restarted
	 * process does not reuse the numbers its predecessor's peers knew. */
	nic->tables.qpn_gen = (uint32_t)(srn_now_ns() >> 10) & SRN_QPN_GEN_MASK;

	ret = srn_progress_start(nic);
	if (ret) {
		snprintf(err, errlen, "%s: cannot start progress thread: %s", nic->cfg.name,
			 strerror(-ret));
		goto fail;
	}
	*out = nic;
	return 0;
fail:
	srn_shm_close(&nic->link.shm);
	srn_direct_own_close(&nic->link.direct);
	srn_diag_close(nic->diag.seg);
	srn_egress_destroy(nic->link.egress);
	srn_rx_batch_free(&nic->link.rx);
	srn_udp_close(&nic->link.udp);
	srn_cc_dev_close(nic);
	free(nic);
	return ret;
}

void srn_nic_destroy(struct srn_nic *nic)
{
	if (!nic)
		return;
	/* Peers stop placing before the progress thread lets go of the
	 * liveness mutex (link/direct.h): else they would read a device
	 * closing as a process dying. */
	srn_direct_own_retire(&nic->link.direct);
	srn_progress_stop(nic);
	/* ACKs held for a post that never came still leave. */
	srn_nic_lock(nic);
	srn_ack_flush(nic);
	srn_txq_flush(nic);
	srn_nic_unlock_raw(nic);
	srn_mcast_fini(nic);
	srn_direct_req_close(&nic->link.direct_req);
	srn_direct_own_close(&nic->link.direct);
	srn_shm_close(&nic->link.shm);
	srn_nic_mirror_faults(nic);
	stats_at_exit(nic);
	srn_diag_close(nic->diag.seg);
	srn_cc_dev_close(nic);
	srn_rx_batch_free(&nic->link.rx);
	if (nic->link.gro)
		srn_gro_batch_free(nic->link.gro);
	free(nic->link.gro);
	srn_egress_destroy(nic->link.egress);
	srn_udp_close(&nic->link.udp);
	free(nic->tables.mrs);
	free(nic->tables.mr_keybyte);
	pthread_mutex_destroy(&nic->lock);
	free(nic);
}

/* The program is exiting with devices open (many verbs programs never
 * close them): ACKs held for a post that will now never come still leave,
 * as they would from a NIC.  trylock: a thread the exit cut off may hold
 * the lock.  It runs after diag_at_exit (diag/shm.c), as it did when it
 * sat in core/device.c, linked before diag/: the linker puts destructors
 * with a priority ahead of the plain ones in .fini_array, which runs
 * backwards. */
__attribute__((destructor(1000))) static void devices_at_exit(void)
{
	struct srn_device **devices;
	int ndevices = srn_devices_built(&devices);
	for (int i = 0; i < ndevices; i++) {
		struct srn_device *d = devices[i];
		if (pthread_mutex_trylock(&d->open_lock))
			continue;
		if (d->nic)
			srn_nic_exit_flush(d->nic);
		pthread_mutex_unlock(&d->open_lock);
	}
}

int srn_device_nic_get(struct srn_device *dev, struct srn_nic **nic)
{
	int ret = 0;
	pthread_mutex_lock(&dev->open_lock);
	if (!dev->nic) {
		char err[256] = "";
		ret = srn_nic_create(dev, &dev->nic, err, sizeof(err));
		if (ret)
			fprintf(stderr, "softrnic: %s\n", err[0] ? err : strerror(-ret));
	}
	if (!ret) {
		dev->open_count++;
		*nic = dev->nic;
	}
	pthread_mutex_unlock(&dev->open_lock);
	return ret;
}

void srn_device_nic_put(struct srn_device *dev)
{
	pthread_mutex_lock(&dev->open_lock);
	if (--dev->open_count == 0) {
		srn_nic_destroy(dev->nic);
		dev->nic = NULL;
	}
	pthread_mutex_unlock(&dev->open_lock);
}

void srn_nic_exit_flush(struct srn_nic *nic)
{
	if (nic->pid != getpid())
		return;
	if (pthread_mutex_trylock(&nic->lock) == 0) {
		srn_ack_flush(nic);
		srn_txq_flush(nic);
		/* The progress thread still runs, and counts forwards and
		 * faults under the lock: read them under it too.  Held by
		 * another thread at exit, the last few go uncounted. */
		srn_nic_mirror_faults(nic);
		pthread_mutex_unlock(&nic->lock);
	}
	/* The trace's last records are still buffered: a program that exits
	 * without closing its device (rping, most rdma_cm programs) would
	 * otherwise leave a trace with a header and nothing else. */
	if (nic->link.udp.pcap)
		srn_pcap_flush(nic->link.udp.pcap, 0);
	srn_shm_exit(&nic->link.shm);
	srn_direct_own_exit(&nic->link.direct);
	stats_at_exit(nic);
}

void srn_nic_unlock(struct srn_nic *nic)
{
	if (srn_egress_pending(nic->link.egress)) {
		/* ACKs held by the last poll leave with these packets. */
		if (nic->lists.ack)
			srn_ack_flush(nic);
		srn_txq_flush(nic);
	}
	/* A packet the fault injector (or a trace) now holds, or a shared
	 * address's probe (link/udp_group.h), is due at a time the sleeping
	 * progress thread may not know of. */
	if (__builtin_expect(nic->link.udp.hooked || nic->link.udp.grp, 0)) {
		uint64_t due = srn_udp_fault_next_ns(&nic->link.udp);
		if (due)
			srn_nic_deadline_set(nic, due);
	}
	srn_diag_idle(nic->diag.busy);
	srn_nic_unlock_raw(nic);
}
