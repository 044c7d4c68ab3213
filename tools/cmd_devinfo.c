/*
 * cmd_devinfo.c - `softrnic devinfo`: what `ibv_devinfo [-v]` shows, for
 * softrnic devices, plus the UDP address each device sends from.
 *
 * Only public verbs calls are used (ibv_get_device_list, ibv_open_device,
 * ibv_query_device_ex, ibv_query_port, ibv_query_gid, ibv_query_pkey), so
 * this doubles as a check that the library answers them the way
 * rdma-core's tools expect.  Field names, value formats and the tab layout
 * follow ibv_devinfo, so scripts written for its output keep working:
 * device values start at column 40, port values at column 48.
 *
 * The enum and flag spellings are tables (code -> name) rather than
 * switches, so adding a value is one line.  Every loop over a table the
 * device reports (GIDs, P_Keys, ports) is capped: a device that reports a
 * silly length cannot make the tool spin.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "link/config.h"     /* the library's configuration parser */
#include "subcommands.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Caps on device-reported table lengths (see the file comment). */
#define DEVINFO_MAX_GIDS 1024
#define DEVINFO_MAX_PKEYS 1024

struct devinfo_opts {
	const char *devname; /* -d: only this device */
	int port;            /* -i: only this port, 0 = all */
	int verbose;         /* -v */
	int list;            /* -l */
};

/* ---- output helpers ---------------------------------------------------- */

/* ibv_devinfo's two value columns: device attributes and port attributes. */
enum level { LVL_DEV, LVL_PORT };
static const int level_indent[] = { [LVL_DEV] = 1, [LVL_PORT] = 3 };
static const int level_column[] = { [LVL_DEV] = 40, [LVL_PORT] = 48 };

/*
 * Print "<tabs>label:<tabs>value\n" with the value on the level's column,
 * assuming 8-column tab stops; at least one tab separates label and value.
 */
static void __attribute__((format(printf, 3, 4)))
field(enum level lvl, const char *label, const char *fmt, ...)
{
	int col = level_indent[lvl] * 8 + (int)strlen(label) + 1;
	va_list ap;

	for (int i = 0; i < level_indent[lvl]; i++)
		putchar('\t');
	printf("%s:", label);
	do {
		putchar('\t');
		col = (col / 8 + 1) * 8;
	} while (col < level_column[lvl]);

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

struct code_name {
	unsigned code;
	const char *name;
};

static const char *name_of(const struct code_name *t, size_t n, unsigned code,
			   const char *unknown)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].code == code)
			return t[i].name;
	return unknown;
}

#define NAME_OF(table, code, unknown) \
	name_of(table, ARRAY_SIZE(table), (unsigned)(code), unknown)

/* Names of set bits, one per line in the flag column; unknown bits last. */
static void show_flags(uint64_t flags, const struct code_name *t, size_t n)
{
	uint64_t known = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t bit = 1ULL << t[i].code;

		known |= bit;
		if (flags & bit)
			printf("\t\t\t\t\t%s\n", t[i].name);
	}
	if (flags & ~known)
		printf("\t\t\t\t\tUnknown flags: 0x%" PRIX64 "\n", flags & ~known);
}

#define SHOW_FLAGS(flags, table) show_flags(flags, table, ARRAY_SIZE(table))

/* ---- names (IBTA spec values, as <infiniband/verbs.h> defines them) ---- */

static const struct code_name transport_names[] = {
	{ IBV_TRANSPORT_IB, "InfiniBand" },  { IBV_TRANSPORT_IWARP, "iWARP" },
	{ IBV_TRANSPORT_USNIC, "usNIC" },     { IBV_TRANSPORT_USNIC_UDP, "usNIC UDP" },
	{ IBV_TRANSPORT_UNSPECIFIED, "unspecified" },
};

static const struct code_name port_state_names[] = {
	{ IBV_PORT_DOWN, "PORT_DOWN" },   { IBV_PORT_INIT, "PORT_INIT" },
	{ IBV_PORT_ARMED, "PORT_ARMED" }, { IBV_PORT_ACTIVE, "PORT_ACTIVE" },
};

static const struct code_name mtu_names[] = {
	{ IBV_MTU_256, "256" },   { IBV_MTU_512, "512" },
	{ IBV_MTU_1024, "1024" }, { IBV_MTU_2048, "2048" },
	{ IBV_MTU_4096, "4096" },
};

static const struct code_name link_layer_names[] = {
	{ IBV_LINK_LAYER_UNSPECIFIED, "Unspecified" },
	{ IBV_LINK_LAYER_INFINIBAND, "InfiniBand" },
	{ IBV_LINK_LAYER_ETHERNET, "Ethernet" },
};

static const struct code_name atomic_cap_names[] = {
	{ IBV_ATOMIC_NONE, "ATOMIC_NONE" }, { IBV_ATOMIC_HCA, "ATOMIC_HCA" },
	{ IBV_ATOMIC_GLOB, "ATOMIC_GLOB" },
};

/* PortInfo encodings (IBTA vol 1, 14.2.5.6): code -> lanes / rate. */
static const struct code_name width_names[] = {
	{ 1, "1" }, { 2, "4" }, { 4, "8" }, { 8, "12" }, { 16, "2" },
};

static const struct code_name speed_names[] = {
	{ 1, "2.5 Gbps" },   { 2, "5.0 Gbps" },   { 4, "10.0 Gbps" },
	{ 8, "10.0 Gbps" },  { 16, "14.0 Gbps" }, { 32, "25.0 Gbps" },
	{ 64, "50.0 Gbps" }, { 128, "100.0 Gbps" },
};

static const struct code_name vl_names[] = {
	{ 1, "1" }, { 2, "2" }, { 3, "4" }, { 4, "8" }, { 5, "15" },
};

/* Spelled as ibv_devinfo spells them, typo included, for grep-ability. */
static const struct code_name phys_state_names[] = {
	{ 1, "SLEEP" },   { 2, "POLLING" },  { 3, "DISABLED" },
	{ 4, "PORT_CONFIGURATION TRAINNING" }, { 5, "LINK_UP" },
	{ 6, "LINK_ERROR_RECOVERY" },          { 7, "PHY TEST" },
};

/* Flag tables hold bit numbers, not masks. */
static const struct code_name device_cap_names[] = {
	{ 0, "RESIZE_MAX_WR" },        { 1, "BAD_PKEY_CNTR" },
	{ 2, "BAD_QKEY_CNTR" },        { 3, "RAW_MULTI" },
	{ 4, "AUTO_PATH_MIG" },        { 5, "CHANGE_PHY_PORT" },
	{ 6, "UD_AV_PORT_ENFORCE" },   { 7, "CURR_QP_STATE_MOD" },
	{ 8, "SHUTDOWN_PORT" },        { 9, "INIT_TYPE" },
	{ 10, "PORT_ACTIVE_EVENT" },   { 11, "SYS_IMAGE_GUID" },
	{ 12, "RC_RNR_NAK_GEN" },      { 13, "SRQ_RESIZE" },
	{ 14, "N_NOTIFY_CQ" },         { 17, "MEM_WINDOW" },
	{ 18, "UD_IP_CSUM" },          { 20, "XRC" },
	{ 21, "MEM_MGT_EXTENSIONS" },  { 23, "MEM_WINDOW_TYPE_2A" },
	{ 24, "MEM_WINDOW_TYPE_2B" },  { 25, "RC_IP_CSUM" },
	{ 26, "RAW_IP_CSUM" },         { 29, "MANAGED_FLOW_STEERING" },
};
_Static_assert(IBV_DEVICE_MANAGED_FLOW_STEERING == 1 << 29 &&
		       IBV_DEVICE_MEM_WINDOW == 1 << 17,
	       "device_cap_names bit numbers match verbs.h");

static const struct code_name device_cap_ex_names[] = {
	{ 34, "RAW_SCATTER_FCS" }, { 36, "PCI_WRITE_END_PADDING" },
};
_Static_assert(IBV_DEVICE_RAW_SCATTER_FCS == 1ULL << 34 &&
		       IBV_DEVICE_PCI_WRITE_END_PADDING == 1ULL << 36,
	       "device_cap_ex_names bit numbers match verbs.h");

static const struct code_name odp_general_names[] = {
	{ 0, "ODP_SUPPORT" }, { 1, "ODP_SUPPORT_IMPLICIT" },
};

static const struct code_name odp_transport_names[] = {
	{ 0, "SUPPORT_SEND" },  { 1, "SUPPORT_RECV" },
	{ 2, "SUPPORT_WRITE" }, { 3, "SUPPORT_READ" },
	{ 4, "SUPPORT_ATOMIC" }, { 5, "SUPPORT_SRQ" },
};
_Static_assert(IBV_ODP_SUPPORT_SRQ_RECV == 1 << 5, "odp bit numbers");

static const struct code_name qpt_support_names[] = {
	{ IBV_QPT_RAW_PACKET, "SUPPORT_RAW_PACKET" },
	{ IBV_QPT_UD, "SUPPORT_UD" },
};

static const struct code_name raw_packet_cap_names[] = {
	{ 0, "C-VLAN stripping offload" }, { 1, "Scatter FCS offload" },
	{ 2, "IP csum offload" },          { 3, "Delay drop" },
};
_Static_assert(IBV_RAW_PACKET_CAP_DELAY_DROP == 1 << 3, "raw packet bits");

/* ---- device attributes (-v) ------------------------------------------- */

enum attr_fmt {
	FMT_DEC,       /* %d / %u */
	FMT_HEX64,     /* 0x%llx */
	FMT_CAP_FLAGS, /* 0x%08x, then the flag names */
	FMT_ATOMIC,    /* NAME (n) */
};

/* Lines printed only when another attribute says the feature exists. */
enum attr_gate { GATE_NONE, GATE_FMR, GATE_SRQ };

struct attr_desc {
	const char *name;
	size_t off, size;
	enum attr_fmt fmt;
	enum attr_gate gate;
};

#define ATTR_IF(f, fmt, gate)                              \
	{ #f, offsetof(struct ibv_device_attr, f),         \
	  sizeof(((struct ibv_device_attr *)0)->f), fmt, gate }
#define ATTR(f, fmt) ATTR_IF(f, fmt, GATE_NONE)
#define DEC(f) ATTR(f, FMT_DEC)

/* In ibv_devinfo -v order. */
static const struct attr_desc device_attrs[] = {
	ATTR(max_mr_size, FMT_HEX64), ATTR(page_size_cap, FMT_HEX64),
	DEC(max_qp), DEC(max_qp_wr),
	ATTR(device_cap_flags, FMT_CAP_FLAGS),
	DEC(max_sge), DEC(max_sge_rd), DEC(max_cq), DEC(max_cqe), DEC(max_mr),
	DEC(max_pd), DEC(max_qp_rd_atom), DEC(max_ee_rd_atom),
	DEC(max_res_rd_atom), DEC(max_qp_init_rd_atom),
	DEC(max_ee_init_rd_atom),
	ATTR(atomic_cap, FMT_ATOMIC),
	DEC(max_ee), DEC(max_rdd), DEC(max_mw), DEC(max_raw_ipv6_qp),
	DEC(max_raw_ethy_qp), DEC(max_mcast_grp), DEC(max_mcast_qp_attach),
	DEC(max_total_mcast_qp_attach), DEC(max_ah), DEC(max_fmr),
	ATTR_IF(max_map_per_fmr, FMT_DEC, GATE_FMR),
	DEC(max_srq),
	ATTR_IF(max_srq_wr, FMT_DEC, GATE_SRQ),
	ATTR_IF(max_srq_sge, FMT_DEC, GATE_SRQ),
	DEC(max_pkeys), DEC(local_ca_ack_delay),
};

/*
 * The value of a field described by offset and size.  4-byte fields are
 * ints in struct ibv_device_attr (or small enough u32s), so they are
 * sign-extended; 1- and 2-byte fields are all unsigned.
 */
static int64_t attr_value(const struct ibv_device_attr *a,
			  const struct attr_desc *d)
{
	const char *p = (const char *)a + d->off;
	uint8_t u8;
	uint16_t u16;
	int32_t i32;
	uint64_t u64;

	switch (d->size) {
	case 1:
		memcpy(&u8, p, 1);
		return u8;
	case 2:
		memcpy(&u16, p, 2);
		return u16;
	case 4:
		memcpy(&i32, p, 4);
		return i32;
	default:
		memcpy(&u64, p, 8);
		return (int64_t)u64;
	}
}

static int attr_gated_off(const struct ibv_device_attr *a, enum attr_gate g)
{
	return (g == GATE_FMR && !a->max_fmr) || (g == GATE_SRQ && !a->max_srq);
}

static void show_device_attrs(const struct ibv_device_attr *a)
{
	for (size_t i = 0; i < ARRAY_SIZE(device_attrs); i++) {
		const struct attr_desc *d = &device_attrs[i];
		int64_t v = attr_value(a, d);

		if (attr_gated_off(a, d->gate))
			continue;
		switch (d->fmt) {
		case FMT_DEC:
			field(LVL_DEV, d->name, "%" PRId64, v);
			break;
		case FMT_HEX64:
			field(LVL_DEV, d->name, "0x%" PRIx64, (uint64_t)v);
			break;
		case FMT_CAP_FLAGS:
			field(LVL_DEV, d->name, "0x%08x", (uint32_t)v);
			SHOW_FLAGS((uint32_t)v, device_cap_names);
			break;
		case FMT_ATOMIC:
			field(LVL_DEV, d->name, "%s (%d)",
			      NAME_OF(atomic_cap_names, v,
				      "invalid atomic capability"),
			      (int)v);
			break;
		}
	}
}

static void show_odp_transport(const char *label, uint32_t caps)
{
	printf("\t%s:\n", label);
	if (!caps)
		printf("\t\t\t\t\tNO SUPPORT\n");
	else
		SHOW_FLAGS(caps, odp_transport_names);
}

static void show_odp_caps(const struct ibv_device_attr_ex *x)
{
	const struct ibv_odp_caps *c = &x->odp_caps;

	printf("\tgeneral_odp_caps:\n");
	SHOW_FLAGS(c->general_caps, odp_general_names);
	show_odp_transport("rc_odp_caps", c->per_transport_caps.rc_odp_caps);
	show_odp_transport("uc_odp_caps", c->per_transport_caps.uc_odp_caps);
	show_odp_transport("ud_odp_caps", c->per_transport_caps.ud_odp_caps);
	show_odp_transport("xrc_odp_caps", x->xrc_odp_caps);
}

static void show_qp_types(const char *indent, uint32_t qpts)
{
	printf("%ssupported_qp:\n", indent);
	SHOW_FLAGS(qpts, qpt_support_names);
}

static void show_offload_caps(const struct ibv_device_attr_ex *x)
{
	if (x->raw_packet_caps) {
		printf("\traw packet caps:\n");
		SHOW_FLAGS(x->raw_packet_caps, raw_packet_cap_names);
	}
	field(LVL_DEV, "device_cap_flags_ex", "0x%" PRIX64,
	      x->device_cap_flags_ex);
	SHOW_FLAGS(x->device_cap_flags_ex & ~0xffffffffULL,
		   device_cap_ex_names);

	printf("\ttso_caps:\n\t\tmax_tso:\t\t\t%u\n", x->tso_caps.max_tso);
	if (x->tso_caps.max_tso)
		show_qp_types("\t\t", x->tso_caps.supported_qpts);

	printf("\trss_caps:\n");
	printf("\t\tmax_rwq_indirection_tables:\t\t\t%u\n",
	       x->rss_caps.max_rwq_indirection_tables);
	printf("\t\tmax_rwq_indirection_table_size:\t\t\t%u\n",
	       x->rss_caps.max_rwq_indirection_table_size);
	printf("\t\trx_hash_function:\t\t\t\t0x%x\n",
	       x->rss_caps.rx_hash_function);
	printf("\t\trx_hash_fields_mask:\t\t\t\t0x%" PRIX64 "\n",
	       x->rss_caps.rx_hash_fields_mask);
	if (x->rss_caps.supported_qpts)
		show_qp_types("\t\t", x->rss_caps.supported_qpts);
	field(LVL_DEV, "max_wq_type_rq", "%u", x->max_wq_type_rq);

	printf("\tpacket_pacing_caps:\n");
	printf("\t\tqp_rate_limit_min:\t%ukbps\n",
	       x->packet_pacing_caps.qp_rate_limit_min);
	printf("\t\tqp_rate_limit_max:\t%ukbps\n",
	       x->packet_pacing_caps.qp_rate_limit_max);
	if (x->packet_pacing_caps.qp_rate_limit_max)
		show_qp_types("\t\t", x->packet_pacing_caps.supported_qpts);
}

static void show_misc_caps(const struct ibv_device_attr_ex *x,
			   const struct ibv_context *ctx)
{
	const struct ibv_tm_caps *tm = &x->tm_caps;

	if (tm->max_num_tags) {
		field(LVL_DEV, "max_rndv_hdr_size", "%u", tm->max_rndv_hdr_size);
		field(LVL_DEV, "max_num_tags", "%u", tm->max_num_tags);
		field(LVL_DEV, "max_ops", "%u", tm->max_ops);
		field(LVL_DEV, "max_sge", "%u", tm->max_sge);
		printf("\tflags:\n");
		if (tm->flags & IBV_TM_CAP_RC)
			printf("\t\t\t\t\tIBV_TM_CAP_RC\n");
	} else {
		printf("\ttag matching not supported\n");
	}

	if (x->cq_mod_caps.max_cq_count && x->cq_mod_caps.max_cq_period) {
		printf("\n\tcq moderation caps:\n");
		printf("\t\tmax_cq_count:\t%u\n", x->cq_mod_caps.max_cq_count);
		printf("\t\tmax_cq_period:\t%u us\n\n",
		       x->cq_mod_caps.max_cq_period);
	}
	if (x->max_dm_size)
		printf("\tmaximum available device memory:\t%" PRIu64 "Bytes\n\n",
		       x->max_dm_size);
	field(LVL_DEV, "num_comp_vectors", "%d", ctx->num_comp_vectors);
}

static void show_device_attrs_ex(const struct ibv_device_attr_ex *x,
				 const struct ibv_context *ctx)
{
	show_device_attrs(&x->orig_attr);
	show_odp_caps(x);
	if (x->completion_timestamp_mask)
		field(LVL_DEV, "completion timestamp_mask", "0x%016" PRIx64,
		      x->completion_timestamp_mask);
	else
		printf("\tcompletion_timestamp_mask not supported\n");
	if (x->hca_core_clock)
		field(LVL_DEV, "hca_core_clock", "%" PRIu64 "kHZ",
		      x->hca_core_clock);
	else
		printf("\tcore clock not supported\n");
	show_offload_caps(x);
	show_misc_caps(x, ctx);
}

/* ---- GIDs, P_Keys and the UDP address --------------------------------- */

static int gid_is_zero(const union ibv_gid *gid)
{
	static const union ibv_gid zero;

	return !memcmp(gid->raw, zero.raw, sizeof(zero.raw));
}

/* ::ffff:a.b.c.d, the RoCEv2 GID of an IPv4 address (RFC 4291 2.5.5.2). */
static int gid_is_v4mapped(const union ibv_gid *gid)
{
	static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(gid->raw, prefix, sizeof(prefix));
}

/*
 * A RoCEv2 GID is the port's IP address, so it is shown as one (as
 * ibv_devinfo does); any other GID as eight groups of hex.
 */
static void show_gid(int index, const union ibv_gid *gid, int roce)
{
	char ip[INET6_ADDRSTRLEN], hex[41], label[16];

	snprintf(label, sizeof(label), "GID[%3d]", index);
	if (roce && inet_ntop(AF_INET6, gid->raw, ip, sizeof(ip))) {
		field(LVL_PORT, label, "%s, RoCE v2", ip);
		return;
	}
	/* Eight "xxxx:" groups; the last colon is cut off. */
	for (int i = 0; i < 8; i++)
		snprintf(hex + 5 * i, sizeof(hex) - 5 * i, "%02x%02x:",
			 gid->raw[2 * i], gid->raw[2 * i + 1]);
	hex[39] = '\0';
	field(LVL_PORT, label, "%s", hex);
}

static int show_gids(struct ibv_context *ctx, uint8_t port,
		     const struct ibv_port_attr *pa)
{
	int n = pa->gid_tbl_len < DEVINFO_MAX_GIDS ? pa->gid_tbl_len :
						     DEVINFO_MAX_GIDS;
	int roce = pa->link_layer == IBV_LINK_LAYER_ETHERNET;
	union ibv_gid gid;

	for (int i = 0; i < n; i++) {
		if (ibv_query_gid(ctx, port, i, &gid)) {
			fprintf(stderr, "Failed to query gid to port %u, "
					"index %d\n", port, i);
			return -1;
		}
		if (!gid_is_zero(&gid))
			show_gid(i, &gid, roce);
	}
	return 0;
}

/* P_Keys are not in ibv_devinfo's output; shown for completeness. */
static int show_pkeys(struct ibv_context *ctx, uint8_t port,
		      const struct ibv_port_attr *pa)
{
	int n = pa->pkey_tbl_len < DEVINFO_MAX_PKEYS ? pa->pkey_tbl_len :
						       DEVINFO_MAX_PKEYS;
	char label[16];
	__be16 pkey;

	for (int i = 0; i < n; i++) {
		if (ibv_query_pkey(ctx, port, i, &pkey)) {
			fprintf(stderr, "Failed to query pkey of port %u, "
					"index %d\n", port, i);
			return -1;
		}
		if (!be16toh(pkey))
			continue;
		snprintf(label, sizeof(label), "PKEY[%3d]", i);
		field(LVL_PORT, label, "0x%04x", be16toh(pkey));
	}
	return 0;
}

/*
 * The UDP port of device devname, from the configuration the library
 * read, parsed by the library's own parser (link/config.c: the same
 * sources, syntax and defaults); SRN_ROCE_PORT if it does not parse or
 * does not name the device (then the library did not open it either).
 */
static unsigned config_udp_port(const char *devname)
{
	struct srn_dev_cfg cfg[SRN_MAX_DEVICES];
	char err[256];
	int n = srn_config_load(cfg, SRN_MAX_DEVICES, err, sizeof(err));

	for (int i = 0; i < n; i++)
		if (!strcmp(cfg[i].name, devname))
			return cfg[i].port;
	return SRN_ROCE_PORT;
}

/* softrnic's own lines: where the device's packets come from. */
static void show_udp_address(struct ibv_context *ctx, const char *devname)
{
	unsigned port = config_udp_port(devname);
	char ip[INET6_ADDRSTRLEN];
	union ibv_gid gid;

	if (ibv_query_gid(ctx, 1, 0, &gid) || gid_is_zero(&gid)) {
		field(LVL_DEV, "udp_address", "unknown (no GID[0] on port 1)");
		return;
	}
	if (gid_is_v4mapped(&gid))
		inet_ntop(AF_INET, &gid.raw[12], ip, sizeof(ip));
	else
		inet_ntop(AF_INET6, gid.raw, ip, sizeof(ip));
	field(LVL_DEV, "udp_address",
	      gid_is_v4mapped(&gid) ? "%s:%u" : "[%s]:%u", ip, port);
}

/* ---- one device --------------------------------------------------------- */

static const char *guid_str(__be64 be, char buf[20])
{
	uint64_t g = be64toh(be);

	snprintf(buf, 20, "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff,
		 (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff,
		 (unsigned)g & 0xffff);
	return buf;
}

static void show_device_header(struct ibv_device *dev,
			       const struct ibv_device_attr *a)
{
	char buf[20];

	printf("hca_id:\t%s\n", ibv_get_device_name(dev));
	field(LVL_DEV, "transport", "%s (%d)",
	      NAME_OF(transport_names, dev->transport_type,
		      "invalid transport"),
	      dev->transport_type);
	if (a->fw_ver[0])
		field(LVL_DEV, "fw_ver", "%s", a->fw_ver);
	field(LVL_DEV, "node_guid", "%s", guid_str(a->node_guid, buf));
	field(LVL_DEV, "sys_image_guid", "%s", guid_str(a->sys_image_guid, buf));
	field(LVL_DEV, "vendor_id", "0x%04x", a->vendor_id);
	field(LVL_DEV, "vendor_part_id", "%u", a->vendor_part_id);
	field(LVL_DEV, "hw_ver", "0x%X", a->hw_ver);
	field(LVL_DEV, "phys_port_cnt", "%u", a->phys_port_cnt);
}

static void show_port_verbose(const struct ibv_port_attr *pa,
			      enum ibv_transport_type transport)
{
	field(LVL_PORT, "max_msg_sz", "0x%x", pa->max_msg_sz);
	field(LVL_PORT, "port_cap_flags", "0x%08x", pa->port_cap_flags);
	field(LVL_PORT, "port_cap_flags2", "0x%04x", pa->port_cap_flags2);
	field(LVL_PORT, "max_vl_num", "%s (%u)",
	      NAME_OF(vl_names, pa->max_vl_num, "invalid value"),
	      pa->max_vl_num);
	field(LVL_PORT, "bad_pkey_cntr", "0x%x", pa->bad_pkey_cntr);
	field(LVL_PORT, "qkey_viol_cntr", "0x%x", pa->qkey_viol_cntr);
	field(LVL_PORT, "sm_sl", "%u", pa->sm_sl);
	field(LVL_PORT, "pkey_tbl_len", "%u", pa->pkey_tbl_len);
	field(LVL_PORT, "gid_tbl_len", "%d", pa->gid_tbl_len);
	field(LVL_PORT, "subnet_timeout", "%u", pa->subnet_timeout);
	field(LVL_PORT, "init_type_reply", "%u", pa->init_type_reply);
	field(LVL_PORT, "active_width", "%sX (%u)",
	      NAME_OF(width_names, pa->active_width, "invalid width"),
	      pa->active_width);
	field(LVL_PORT, "active_speed", "%s (%u)",
	      NAME_OF(speed_names, pa->active_speed, "invalid speed"),
	      pa->active_speed);
	if (transport == IBV_TRANSPORT_IB)
		field(LVL_PORT, "phys_state", "%s (%u)",
		      NAME_OF(phys_state_names, pa->phys_state,
			      "invalid physical state"),
		      pa->phys_state);
}

static int show_port(struct ibv_context *ctx, uint8_t port,
		     const struct devinfo_opts *o)
{
	struct ibv_port_attr pa;

	if (ibv_query_port(ctx, port, &pa)) {
		fprintf(stderr, "Failed to query port %u props\n", port);
		return -1;
	}
	printf("\t\tport:\t%u\n", port);
	field(LVL_PORT, "state", "%s (%d)",
	      NAME_OF(port_state_names, pa.state, "invalid state"), pa.state);
	field(LVL_PORT, "max_mtu", "%s (%d)",
	      NAME_OF(mtu_names, pa.max_mtu, "invalid MTU"), pa.max_mtu);
	field(LVL_PORT, "active_mtu", "%s (%d)",
	      NAME_OF(mtu_names, pa.active_mtu, "invalid MTU"), pa.active_mtu);
	field(LVL_PORT, "sm_lid", "%u", pa.sm_lid);
	field(LVL_PORT, "port_lid", "%u", pa.lid);
	field(LVL_PORT, "port_lmc", "0x%02x", pa.lmc);
	field(LVL_PORT, "link_layer", "%s",
	      NAME_OF(link_layer_names, pa.link_layer, "Unknown"));
	if (o->verbose) {
		show_port_verbose(&pa, ctx->device->transport_type);
		if (show_gids(ctx, port, &pa) || show_pkeys(ctx, port, &pa))
			return -1;
	}
	putchar('\n');
	return 0;
}

static int show_ports(struct ibv_context *ctx, int nports,
		      const struct devinfo_opts *o)
{
	for (int p = 1; p <= nports; p++) {
		if (o->port && p != o->port)
			continue;
		if (show_port(ctx, (uint8_t)p, o))
			return -1;
	}
	return 0;
}

static int show_device(struct ibv_device *dev, const struct devinfo_opts *o)
{
	struct ibv_device_attr_ex attr;
	struct ibv_context *ctx;
	int rc = -1;

	ctx = ibv_open_device(dev);
	if (!ctx) {
		fprintf(stderr, "Failed to open device %s\n",
			ibv_get_device_name(dev));
		return -1;
	}
	if (ibv_query_device_ex(ctx, NULL, &attr)) {
		fprintf(stderr, "Failed to query device props\n");
		goto out;
	}
	if (o->port > attr.orig_attr.phys_port_cnt) {
		fprintf(stderr, "Invalid port %d requested for device %s\n",
			o->port, ibv_get_device_name(dev));
		goto out;
	}
	show_device_header(dev, &attr.orig_attr);
	if (o->verbose)
		show_device_attrs_ex(&attr, ctx);
	rc = show_ports(ctx, attr.orig_attr.phys_port_cnt, o);
	show_udp_address(ctx, ibv_get_device_name(dev));
	putchar('\n');
out:
	if (ibv_close_device(ctx)) {
		fprintf(stderr, "Failed to close device\n");
		rc = -1;
	}
	return rc;
}

/* ---- command ------------------------------------------------------------ */

void srn_usage_devinfo(FILE *out)
{
	fprintf(out,
		"Usage: softrnic devinfo [-d DEV] [-i PORT] [-l] [-v]\n"
		"\n"
		"Shows softrnic devices as ibv_devinfo does, plus the UDP\n"
		"address:port each device sends RoCEv2 packets from.\n"
		"\n"
		"Options:\n"
		"  -d, --ib-dev=DEV    only device DEV (default: all devices)\n"
		"  -i, --ib-port=PORT  only port PORT (default: all ports)\n"
		"  -l, --list          print only the device names\n"
		"  -v, --verbose       all device and port attributes, GIDs, P_Keys\n"
		"  -h, --help          show this help\n");
}

static int parse_devinfo_args(int argc, char *argv[], struct devinfo_opts *o)
{
	static const struct option longopts[] = {
		{ "ib-dev", required_argument, NULL, 'd' },
		{ "ib-port", required_argument, NULL, 'i' },
		{ "list", no_argument, NULL, 'l' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "d:i:lvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			o->devname = optarg;
			break;
		case 'i':
			o->port = (int)strtol(optarg, &end, 0);
			if (*end || o->port < 1 || o->port > 255) {
				fprintf(stderr, "softrnic devinfo: bad port "
						"'%s'\n", optarg);
				return SRN_EXIT_USAGE;
			}
			break;
		case 'l':
			o->list = 1;
			break;
		case 'v':
			o->verbose = 1;
			break;
		case 'h':
			srn_usage_devinfo(stdout);
			return SRN_EXIT_OK;
		default:
			srn_usage_devinfo(stderr);
			return SRN_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "softrnic devinfo: unexpected argument '%s'\n",
			argv[optind]);
		return SRN_EXIT_USAGE;
	}
	return -1;
}

static int show_list(struct ibv_device **list, int n)
{
	printf("%d HCA%s found:\n", n, n == 1 ? "" : "s");
	for (int i = 0; i < n; i++)
		printf("\t%s\n", ibv_get_device_name(list[i]));
	putchar('\n');
	return SRN_EXIT_OK;
}

static int show_selected(struct ibv_device **list, int n,
			 const struct devinfo_opts *o)
{
	int shown = 0, failed = 0;

	for (int i = 0; i < n; i++) {
		if (o->devname &&
		    strcmp(ibv_get_device_name(list[i]), o->devname))
			continue;
		shown++;
		if (show_device(list[i], o))
			failed = 1;
	}
	if (!shown) {
		if (o->devname)
			fprintf(stderr, "softrnic devinfo: device '%s' not "
					"found\n", o->devname);
		else
			fprintf(stderr, "softrnic devinfo: no devices found "
					"(is the program using softrnic's "
					"library?)\n");
		return SRN_EXIT_FAIL;
	}
	return failed ? SRN_EXIT_FAIL : SRN_EXIT_OK;
}

int srn_cmd_devinfo(int argc, char *argv[])
{
	struct devinfo_opts o = { 0 };
	struct ibv_device **list;
	int n, rc;

	rc = parse_devinfo_args(argc, argv, &o);
	if (rc >= 0)
		return rc;

	list = ibv_get_device_list(&n);
	if (!list) {
		perror("softrnic devinfo: failed to get the device list");
		return SRN_EXIT_FAIL;
	}
	rc = o.list ? show_list(list, n) : show_selected(list, n, &o);
	ibv_free_device_list(list);
	return rc;
}
