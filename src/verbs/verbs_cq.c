/*
 * verbs_cq.c - completion queues, completion channels, polling.
 */
#include <fcntl.h>
#include <stdlib.h>

#include "core/cq.h"
#include "core/device.h"
#include "core/limits.h"
#include "core/nic.h"
#include "engine/nic.h"
#include "engine/wait.h"
#include "verbs/verbs.h"

SRN_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct srn_channel *ch = calloc(1, sizeof(*ch));
	if (!ch)
		return srn_null_errno(-ENOMEM);
	int ret = srn_channel_init(ch, srn_ctx(context));
	if (ret) {
		free(ch);
		return srn_null_errno(ret);
	}
	ch->ibch.context = context;
	ch->ibch.refcnt = 0;
	srn_fdwait_channel_add(ch);
	return &ch->ibch;
}

SRN_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct srn_channel *ch = srn_channel(channel);
	if (ch->ncqs)
		return EBUSY;
	srn_fdwait_channel_del(ch);
	srn_channel_fini(ch);
	free(ch);
	return 0;
}

SRN_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
					struct ibv_comp_channel *channel, int comp_vector)
{
	return srn_cq_create(context, cqe, cq_context, channel, comp_vector);
}

struct ibv_cq *srn_cq_create(struct ibv_context *context, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	if (cqe < 1 || cqe > SRN_MAX_CQE || comp_vector < 0 ||
	    comp_vector >= context->num_comp_vectors)
		return srn_null_errno(-EINVAL);
	struct srn_cq *cq = calloc(1, sizeof(*cq));
	if (!cq)
		return srn_null_errno(-ENOMEM);
	int ret = srn_cq_init(cq, cqe);
	if (ret) {
		free(cq);
		return srn_null_errno(ret);
	}
	struct srn_context *ctx = srn_ctx(context);
	cq->ctx = ctx;
	cq->nic = ctx->nic;
	cq->channel = channel ? srn_channel(channel) : NULL;
	if (cq->channel) {
		srn_nic_lock(cq->nic);
		cq->channel->ncqs++;
		srn_nic_unlock(cq->nic);
	}
	cq->ibcq.context = context;
	cq->ibcq.channel = channel;
	cq->ibcq.cq_context = cq_context;
	cq->ibcq.cqe = cqe;
	pthread_mutex_init(&cq->ibcq.mutex, NULL);
	pthread_cond_init(&cq->ibcq.cond, NULL);
	srn_nic_lock(cq->nic);
	cq->diag = srn_diag_obj_add(cq->nic->diag.seg, SRN_DIAG_CQ, cq);
	srn_diag_snap(cq->diag);
	srn_nic_unlock(cq->nic);
	return &cq->ibcq;
}

SRN_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct srn_cq *cq = srn_cq(ibcq);
	if (cqe < 1 || cqe > SRN_MAX_CQE)
		return EINVAL;
	srn_nic_lock(cq->nic);
	uint32_t used = cq->head - cq->tail;
	int ret = 0;
	if ((uint32_t)cqe < used) {
		ret = EINVAL;   /* would lose completions */
	} else {
		struct srn_cq n = *cq;
		int r = srn_cq_init(&n, cqe);
		if (r) {
			ret = -r;
		} else {
			uint64_t *ts = cq->ts ? calloc(n.size, sizeof(*ts)) : NULL;
			for (uint32_t i = 0; i < used; i++) {
				n.ring[i] = cq->ring[(cq->tail + i) & (cq->size - 1)];
				if (ts)
					ts[i] = cq->ts[(cq->tail + i) & (cq->size - 1)];
			}
			if (cq->ts) {
				free(cq->ts);
				cq->ts = ts;
			}
			free(cq->ring);
			cq->ring = n.ring;
			cq->size = n.size;
			cq->tail = 0;
			cq->head = used;
			cq->ibcq.cqe = cqe;
		}
	}
	srn_nic_unlock(cq->nic);
	return ret;
}

SRN_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct srn_cq *cq = srn_cq(ibcq);
	srn_nic_lock(cq->nic);
	if (cq->nqps) {
		srn_nic_unlock(cq->nic);
		return EBUSY;
	}
	if (cq->channel) {
		srn_channel_forget(cq->channel, cq);
		cq->channel->ncqs--;
	}
	srn_diag_obj_del(cq->diag);
	srn_nic_unlock(cq->nic);
	srn_verbs_forget_events(cq->ctx, &cq->async_ref);
	srn_cq_fini(cq);
	pthread_mutex_destroy(&ibcq->mutex);
	pthread_cond_destroy(&ibcq->cond);
	free(cq);
	return 0;
}

int srn_verbs_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct srn_cq *cq = srn_cq(ibcq);
	struct srn_nic *nic = cq->nic;
	if (n < 0)
		return -EINVAL;
	srn_nic_lock(nic);
	/* Under the lock: one clock read serves the stamp and the pass. */
	uint64_t now = srn_progress_app_active(nic);
	int got = srn_cq_pop(cq, n, wc);
	if (got < n) {
		/* Empty (or short): do the NIC's work in this thread, then
		 * look again. */
		srn_count(nic->diag.cnt, SRN_CNT_APP_PROGRESS, 1);
		cq->app_polling = true;
		srn_progress_poll_at(nic, SRN_POLL_APP, now);
		cq->app_polling = false;
		got += srn_cq_pop(cq, n - got, wc + got);
		srn_cq_fire_deferred(cq);
	} else {
		srn_progress_held_acks_due(nic, now);
	}
	bool sleeps = srn_cq_armed_look(cq, got) && !srn_channel_blocks(cq->channel);
	srn_nic_unlock(nic);
	if (sleeps)
		srn_progress_app_sleeps(nic);
	return got;
}

int srn_verbs_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct srn_cq *cq = srn_cq(ibcq);
	if (!cq->channel)
		return EINVAL;
	srn_nic_lock(cq->nic);
	/* "Next" is stronger than "solicited"; a pending "next" stays. */
	if (!solicited_only)
		cq->arm = SRN_CQ_ARM_NEXT;
	else if (cq->arm == SRN_CQ_DISARMED)
		cq->arm = SRN_CQ_ARM_SOLICITED;
	cq->armed_looked = false;
	srn_nic_unlock(cq->nic);
	/* Arming is what an application does before it sleeps on the
	 * channel: hand progress to the background thread now, unless this
	 * program sleeps in ibv_get_cq_event, which serves the device
	 * itself (engine/wait.c). */
	if (!srn_channel_blocks(cq->channel))
		srn_progress_app_sleeps(cq->nic);
	return 0;
}

SRN_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
				void **cq_context)
{
	struct srn_channel *ch = srn_channel(channel);
	struct srn_nic *nic = ch->ctx->nic;
	struct srn_cq *c;
	int ret = srn_channel_take(ch, &c);
	if (ret) {
		int fl = fcntl(ch->ibch.fd, F_GETFL);
		ret = fl < 0 ? -errno : (fl & O_NONBLOCK) ? -EAGAIN : srn_wait_event(nic, ch, &c);
		srn_channel_note_wait(ch, ret != -EAGAIN);
		if (ret == -EOPNOTSUPP || ret == -EAGAIN) {
			/* The old way: the progress thread serves the device.
			 * Not for a non-blocking fd the program waits for in its
			 * own poll or epoll (we serve the device there): it
			 * drains the channel until EAGAIN after every wake, and
			 * the hand-over woke the progress thread once per I/O
			 * (softrnic-nvmf perf: 1.4 wake-ups per read). */
			if (ret == -EOPNOTSUPP || !srn_channel_fdwaited(ch))
				srn_progress_app_sleeps(nic);
			ret = srn_channel_get(ch, &c);
		}
	} else {
		srn_channel_note_wait(ch, false);
	}
	if (ret) {
		errno = -ret;
		return -1;
	}
	*cq = &c->ibcq;
	*cq_context = c->ibcq.cq_context;
	return 0;
}

SRN_EXPORT void ibv_ack_cq_events(struct ibv_cq *ibcq, unsigned int nevents)
{
	pthread_mutex_lock(&ibcq->mutex);
	ibcq->comp_events_completed += nevents;
	pthread_cond_signal(&ibcq->cond);
	pthread_mutex_unlock(&ibcq->mutex);
}
