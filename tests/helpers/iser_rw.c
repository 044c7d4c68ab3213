/* iser_rw - write a deterministic pattern to an iSCSI/iSER LUN through
 * libiscsi, read it back and compare byte for byte (test_iser_tgt.sh).
 *
 *   iser_rw [-i INITIATOR_IQN] [-m MIB] [-s SEED] [-o PATTERN_FILE] [-a ACK_TIMEOUT] URL
 *
 * URL is libiscsi's, e.g. iser://10.77.0.1/iqn.2024-01.org.softrnic:disk/1.
 * Writes MIB MiB (default 32) from LBA 0 with synchronous WRITE(16) and
 * WRITE(10) commands of varying sizes, asks for SYNCHRONIZE CACHE(10),
 * reads everything back with READ(16)/READ(10) on other boundaries and
 * compares.  With -o the expected bytes also go to PATTERN_FILE, so the
 * caller can compare the target's backing file with cmp(1).
 * Exit 0: every byte matched; 1: a mismatch or any error (said on stderr);
 * 2: usage.  Libiscsi's automatic reconnect is turned off, so a lost
 * connection is an error here, not a silent retry.
 *
 * -a T sets the RC ACK timeout of the iSER connection to 4.096 us * 2^T
 * (rdma_set_option RDMA_OPTION_ID_ACK_TIMEOUT; through the CM's REQ the
 * target's QP gets it too).  Newer libiscsi has a call for this
 * (iscsi_set_rdma_ack_timetout, sic; applied just before rdma_resolve_route);
 * 1.19 has none, so this program's own rdma_resolve_route, which
 * libiscsi's call binds to, applies it and calls librdmacm's.  It matters
 * with injected loss: libiscsi 1.19's synchronous calls over iSER fail
 * ("revents is not POLLIN") when a command waits more than 1 s, and a lost
 * retransmission costs one ACK timeout, about 1.07 s by default.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>
#include <rdma/rdma_cma.h>

/* Kept in globals, so that an early error return leaves nothing
 * LeakSanitizer would report over the error itself. */
static unsigned char *want;       /* the pattern */
static struct iscsi_context *iscsi;
static struct iscsi_url *url;
static struct scsi_task *task;

static int ack_timeout = -1;      /* -a; -1: leave librdmacm's default */
static int ack_timeout_set;       /* connections it was applied to */

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	static int (*real)(struct rdma_cm_id *, int);
	static int (*set_option)(struct rdma_cm_id *, int, int, void *, size_t);
	if (real == NULL) {
		real = (int (*)(struct rdma_cm_id *, int))dlsym(RTLD_NEXT, "rdma_resolve_route");
		set_option = (int (*)(struct rdma_cm_id *, int, int, void *, size_t))dlsym(
			RTLD_NEXT, "rdma_set_option");
	}
	if (real == NULL) {
		errno = ENOSYS;
		return -1;
	}
	if (ack_timeout >= 0) {
		uint8_t t = (uint8_t)ack_timeout;
		if (set_option == NULL ||
		    set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof(t)) != 0)
			fprintf(stderr, "iser_rw: rdma_set_option(ACK_TIMEOUT %d) failed: %s\n",
				ack_timeout, strerror(errno));
		else
			ack_timeout_set++;
	}
	return real(id, timeout_ms);
}

/* splitmix64 of (seed, word index): every 8 bytes depend on their place,
 * so a block written to or read from the wrong LBA cannot match. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void fill(unsigned char *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len / 8; i++) {
		uint64_t v = mix(seed * 0x100000001b3ull ^ i);
		memcpy(buf + i * 8, &v, 8);
	}
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Transfer sizes in KiB, cycled; reads use them from another start so
 * read boundaries differ from write boundaries.  libiscsi 1.19's iSER
 * transport refuses commands above 256 KiB here ("Libiscsi-iSER supports
 * messages smaller than 512k", then "Failed to send Write16 command"). */
static const unsigned sizes_kib[] = { 256, 4, 192, 64, 12, 128, 36, 252, 8, 160 };
#define NSIZES (sizeof(sizes_kib) / sizeof(sizes_kib[0]))

/* Check a finished task; on failure say why (with sense data) and return -1. */
static int task_ok(struct iscsi_context *ctx, struct scsi_task *t,
		   const char *what, uint64_t lba, uint32_t len)
{
	if (t == NULL) {
		fprintf(stderr, "iser_rw: %s lba %" PRIu64 " len %u: %s\n", what, lba, len,
			iscsi_get_error(ctx));
		return -1;
	}
	if (t->status != SCSI_STATUS_GOOD) {
		if (t->status == SCSI_STATUS_CHECK_CONDITION)
			fprintf(stderr, "iser_rw: %s lba %" PRIu64 " len %u: CHECK CONDITION %s/%s\n",
				what, lba, len, scsi_sense_key_str(t->sense.key),
				scsi_sense_ascq_str(t->sense.ascq));
		else
			fprintf(stderr, "iser_rw: %s lba %" PRIu64 " len %u: status %d: %s\n", what,
				lba, len, t->status, iscsi_get_error(ctx));
		scsi_free_scsi_task(t);
		return -1;
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: iser_rw [-i INITIATOR_IQN] [-m MIB] [-s SEED] [-o PATTERN_FILE] "
		"[-a ACK_TIMEOUT] URL\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *initiator = "iqn.2024-01.org.softrnic:iser-rw";
	const char *pattern_out = NULL;
	uint64_t seed = 1;
	unsigned mib = 32;
	int c;

	while ((c = getopt(argc, argv, "i:m:s:o:a:")) != -1) {
		switch (c) {
		case 'a': ack_timeout = atoi(optarg); break;
		case 'i': initiator = optarg; break;
		case 'm': mib = (unsigned)strtoul(optarg, NULL, 0); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'o': pattern_out = optarg; break;
		default: usage();
		}
	}
	if (optind != argc - 1 || mib == 0 || mib > 1024 || ack_timeout > 31)
		usage();

	size_t total = (size_t)mib << 20;
	want = malloc(total);
	if (want == NULL) {
		fprintf(stderr, "iser_rw: out of memory\n");
		return 1;
	}
	fill(want, total, seed);
	if (pattern_out != NULL) {
		FILE *f = fopen(pattern_out, "wb");
		if (f == NULL || fwrite(want, 1, total, f) != total || fclose(f) != 0) {
			fprintf(stderr, "iser_rw: cannot write %s: %s\n", pattern_out, strerror(errno));
			return 1;
		}
	}

	iscsi = iscsi_create_context(initiator);
	if (iscsi == NULL) {
		fprintf(stderr, "iser_rw: cannot create an iSCSI context\n");
		return 1;
	}
	url = iscsi_parse_full_url(iscsi, argv[optind]);
	if (url == NULL) {
		fprintf(stderr, "iser_rw: bad URL %s: %s\n", argv[optind], iscsi_get_error(iscsi));
		return 1;
	}
	iscsi_set_session_type(iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_header_digest(iscsi, ISCSI_HEADER_DIGEST_NONE);
	iscsi_set_noautoreconnect(iscsi, 1);
	double t0 = now_s();
	if (iscsi_full_connect_sync(iscsi, url->portal, url->lun) != 0) {
		fprintf(stderr, "iser_rw: login to %s failed: %s\n", argv[optind], iscsi_get_error(iscsi));
		return 1;
	}
	int lun = url->lun;
	iscsi_destroy_url(url);
	url = NULL;
	if (ack_timeout >= 0 && ack_timeout_set == 0) {
		fprintf(stderr, "iser_rw: -a %d was not applied: libiscsi did not call "
			"rdma_resolve_route through this program (not an iser:// URL?)\n", ack_timeout);
		return 1;
	}

	task = iscsi_readcapacity16_sync(iscsi, lun);
	if (task_ok(iscsi, task, "READ CAPACITY(16)", 0, 0) != 0)
		return 1;
	struct scsi_readcapacity16 *rc16 = scsi_datain_unmarshall(task);
	if (rc16 == NULL || rc16->block_length == 0 || rc16->block_length > 4096 ||
	    4096 % rc16->block_length != 0) {
		fprintf(stderr, "iser_rw: unusable READ CAPACITY(16) data\n");
		return 1;
	}
	uint32_t bs = rc16->block_length;
	uint64_t blocks = rc16->returned_lba + 1;
	scsi_free_scsi_task(task);
	if (blocks * bs < total) {
		fprintf(stderr, "iser_rw: the LUN holds %" PRIu64 " bytes, fewer than %zu\n", blocks * bs,
			total);
		return 1;
	}

	/* Write: WRITE(16) and WRITE(10) in turn, sizes cycling. */
	double t1 = now_s();
	unsigned nw16 = 0, nw10 = 0, nr16 = 0, nr10 = 0, k = 0;
	for (size_t off = 0; off < total; k++) {
		uint32_t len = sizes_kib[k % NSIZES] << 10;
		if (len > total - off)
			len = (uint32_t)(total - off);
		uint64_t lba = off / bs;
		if (k % 2 == 0) {
			task = iscsi_write16_sync(iscsi, lun, lba, want + off, len, (int)bs, 0, 0, 0, 0, 0);
			if (task_ok(iscsi, task, "WRITE(16)", lba, len) != 0)
				return 1;
			nw16++;
		} else {
			task = iscsi_write10_sync(iscsi, lun, (uint32_t)lba, want + off, len, (int)bs, 0, 0,
						  0, 0, 0);
			if (task_ok(iscsi, task, "WRITE(10)", lba, len) != 0)
				return 1;
			nw10++;
		}
		scsi_free_scsi_task(task);
		off += len;
	}
	task = iscsi_synchronizecache10_sync(iscsi, lun, 0, 0, 0, 0);
	if (task_ok(iscsi, task, "SYNCHRONIZE CACHE(10)", 0, 0) != 0)
		return 1;
	scsi_free_scsi_task(task);

	/* Read back on other boundaries: READ(10) and READ(16) in turn. */
	double t2 = now_s();
	size_t bad = 0, first_bad = SIZE_MAX;
	k = 3;
	for (size_t off = 0; off < total; k++) {
		uint32_t len = sizes_kib[k % NSIZES] << 10;
		if (len > total - off)
			len = (uint32_t)(total - off);
		uint64_t lba = off / bs;
		if (k % 2 == 0) {
			task = iscsi_read16_sync(iscsi, lun, lba, len, (int)bs, 0, 0, 0, 0, 0);
			if (task_ok(iscsi, task, "READ(16)", lba, len) != 0)
				return 1;
			nr16++;
		} else {
			task = iscsi_read10_sync(iscsi, lun, (uint32_t)lba, len, (int)bs, 0, 0, 0, 0, 0);
			if (task_ok(iscsi, task, "READ(10)", lba, len) != 0)
				return 1;
			nr10++;
		}
		if (task->datain.data == NULL || task->datain.size != (int)len) {
			fprintf(stderr, "iser_rw: read lba %" PRIu64 ": %d bytes of data, expected %u\n", lba,
				task->datain.data ? task->datain.size : 0, len);
			return 1;
		}
		if (memcmp(task->datain.data, want + off, len) != 0) {
			for (uint32_t i = 0; i < len; i++) {
				if (task->datain.data[i] != want[off + i]) {
					if (first_bad == SIZE_MAX)
						first_bad = off + i;
					bad++;
				}
			}
		}
		scsi_free_scsi_task(task);
		off += len;
	}
	double t3 = now_s();

	iscsi_logout_sync(iscsi);
	iscsi_destroy_context(iscsi);
	iscsi = NULL;
	free(want);
	want = NULL;

	if (bad != 0) {
		fprintf(stderr, "iser_rw: MISMATCH: %zu of %zu bytes differ, the first at offset %zu\n", bad,
			total, first_bad);
		return 1;
	}
	printf("iser_rw: ok: %u MiB (block %u, capacity %" PRIu64 " blocks) login %.2f s, "
	       "written by %u WRITE(16) + %u WRITE(10) in %.2f s (%.0f MiB/s), "
	       "read back by %u READ(16) + %u READ(10) in %.2f s (%.0f MiB/s), every byte matched\n",
	       mib, bs, blocks, t1 - t0, nw16, nw10, t2 - t1, mib / (t2 - t1), nr16, nr10, t3 - t2,
	       mib / (t3 - t2));
	return 0;
}
