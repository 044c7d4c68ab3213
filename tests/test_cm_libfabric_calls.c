/*
 * test_cm_libfabric_calls.c - the rdma_cm calls libfabric's verbs provider
 * and UCX's rdmacm connection manager make, answered as rdma-core does
 * (issue 13). Each check names the program that failed on our old answer.
 *
 *   bind to a loopback address no device owns: succeeds, id->verbs NULL
 *     (libfabric binds "localhost" and then uses each device's address)
 *   rdma_getaddrinfo(NULL, NULL, hints): the hints' destination and source
 *     (libfabric's active side)
 *   a synchronous id that resolved an address: id->pd is the device's PD
 *     (UCX creates its placeholder QP on it), and rdma_migrate_id to a
 *     channel succeeds although the id still holds its last event
 *     (libfabric moves the id to its EQ's channel)
 *
 * Runs on the zero-configuration loopback device (127.0.0.N), linked
 * against our librdmacm.so.1 as an rdma_cm program is.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "check.h"

static struct sockaddr_in ipv4(const char *ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static void bind_unowned_loopback(void)
{
	struct rdma_cm_id *id;
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP)) {
		CHECK(0, "rdma_create_id: %s", strerror(errno));
		return;
	}
	/* 127.0.0.254: loopback, and no zero-configuration device takes it
	 * while the test runs alone on its device. */
	struct sockaddr_in a = ipv4("127.0.0.254", 0);
	int ret = rdma_bind_addr(id, (struct sockaddr *)&a);
	CHECK(ret == 0 && id->verbs == NULL,
	      "bind to unowned loopback 127.0.0.254: ret %d (%s), verbs %p", ret,
	      ret ? strerror(errno) : "-", (void *)id->verbs);
	struct sockaddr_in b = ipv4("10.255.255.1", 0);
	struct rdma_cm_id *id2;
	if (!rdma_create_id(NULL, &id2, NULL, RDMA_PS_TCP)) {
		ret = rdma_bind_addr(id2, (struct sockaddr *)&b);
		CHECK(ret == -1 && errno == EADDRNOTAVAIL,
		      "bind to a foreign non-loopback address still fails EADDRNOTAVAIL (ret %d)", ret);
		rdma_destroy_id(id2);
	}
	rdma_destroy_id(id);
}

static void getaddrinfo_from_hints(void)
{
	struct sockaddr_in dst = ipv4("10.1.2.3", 7471), src = ipv4("10.1.2.4", 0);
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP, .ai_qp_type = IBV_QPT_RC,
				       .ai_family = AF_INET,
				       .ai_dst_addr = (struct sockaddr *)&dst,
				       .ai_dst_len = sizeof(dst),
				       .ai_src_addr = (struct sockaddr *)&src,
				       .ai_src_len = sizeof(src) };
	struct rdma_addrinfo *res = NULL;
	int ret = rdma_getaddrinfo(NULL, NULL, &hints, &res);
	CHECK(ret == 0 && res && res->ai_dst_addr && res->ai_dst_len == sizeof(dst) &&
		      !memcmp(res->ai_dst_addr, &dst, sizeof(dst)) && res->ai_src_addr &&
		      !memcmp(res->ai_src_addr, &src, sizeof(src)) && res->ai_family == AF_INET,
	      "rdma_getaddrinfo(NULL, NULL, hints) gives the hints' addresses (ret %d)", ret);
	if (!ret)
		rdma_freeaddrinfo(res);
	ret = rdma_getaddrinfo(NULL, NULL, NULL, &res);
	CHECK(ret == -1 && errno == EINVAL, "rdma_getaddrinfo(NULL, NULL, NULL) is EINVAL");
}

static void sync_resolve_then_migrate(void)
{
	struct rdma_cm_id *id;
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP)) {
		CHECK(0, "rdma_create_id: %s", strerror(errno));
		return;
	}
	struct sockaddr_in dst = ipv4("127.0.0.1", 7471);
	int ret = rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000);
	CHECK(ret == 0 && id->verbs, "synchronous rdma_resolve_addr to 127.0.0.1 (ret %d)", ret);
	if (ret) {
		rdma_destroy_id(id);
		return;
	}
	CHECK(id->pd && id->pd->context == id->verbs, "id->pd is a PD of id->verbs (%p)",
	      (void *)id->pd);
	CHECK(id->event != NULL, "the synchronous call left its event in id->event");
	struct rdma_event_channel *ch = rdma_create_event_channel();
	ret = ch ? rdma_migrate_id(id, ch) : -1;
	CHECK(ret == 0 && id->channel == ch && id->event == NULL,
	      "rdma_migrate_id of a synchronous id holding its event (ret %d, %s)", ret,
	      ret ? strerror(errno) : "-");
	rdma_destroy_id(id);
	if (ch)
		rdma_destroy_event_channel(ch);
}

int main(void)
{
	bind_unowned_loopback();
	getaddrinfo_from_hints();
	sync_resolve_then_migrate();
	return srn_check_result();
}
