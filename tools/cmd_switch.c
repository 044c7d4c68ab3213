/*
 * cmd_switch.c - `softrnic switch`: an emulated switch port between
 * network interfaces (veths into namespaces), for showing what
 * congestion does to RoCE.
 *
 * Whole Ethernet frames are forwarded with AF_PACKET sockets, one per
 * port, as a learning bridge: RoCEv2's ICRC covers the IP addresses and
 * ports, so a UDP relay would break every packet; a switch may change
 * only what the ICRC masks (TOS/ECN, TTL, the IPv4 checksum).  Frames to
 * the egress port wait in its queue (switch_queue.c: rate, buffer, RED
 * ECN marking, tail drop, XOFF/XON); frames to the other ports go at
 * once.  Sockets use PACKET_VNET_HDR so checksum-offloaded and GSO frames
 * of the veths pass through intact (the kernel finishes them on the way
 * out); a GSO frame is one queue entry and one marking decision.
 *
 * PFC-style pause: above XOFF the switch stops reading its ingress ports
 * (their socket buffers play the senders' NIC queues, as a paused link
 * would hold the frames upstream) and sends an IEEE 802.1Qbb PFC frame
 * out of each ingress port; at XON it resumes and sends a zero-quanta
 * PFC frame.  While paused the PFC frames are refreshed (a switch keeps
 * a pause up by resending it before the quanta run out).  softrnic
 * senders cannot see PFC frames without CAP_NET_RAW, so with --pause-dir
 * the switch also keeps one pause record per ingress port
 * (switch_pause.c, src/link/pause.h), which they honour instead.
 *
 * ECMP: --ecmp PORT adds a second egress link towards the same place,
 * with its own queue of the same configuration; frames are spread over
 * the two by a hash of their 5-tuple (switch_flow.c), as a switch's ECMP
 * does, so each flow keeps one path and its order.  The two links are one
 * port to the bridge: a MAC learned on either is "the egress".
 *
 * Needs CAP_NET_RAW.  Every wait is bounded by --duration or a signal.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "subcommands.h"
#include "switch_flow.h"
#include "switch_pause.h"
#include "switch_queue.h"

#define MAX_PORTS	8
#define MAC_TABLE	64
#define VNET_LEN	((uint32_t)sizeof(struct virtio_net_hdr))
#define FRAME_MAX	(65536u + 256u)
#define PFC_ETHERTYPE	0x8808	/* MAC control */
#define PFC_OPCODE	0x0101	/* 802.1Qbb priority-based flow control */
#define PFC_QUANTA	0xffff	/* the longest pause one frame asks for */
/* The pause a frame of PFC_QUANTA asks for, in 512-bit-time quanta on the
 * ingress link, taken as 100 Mb/s: 335 ms.  Refreshed well before then. */
#define PFC_PORT_BPS	100000000ull
#define PAUSE_LEASE_NS	((uint64_t)PFC_QUANTA * 512ull * 1000000000ull / PFC_PORT_BPS)
#define PAUSE_REFRESH_NS 100000000ull
#define MAX_EGRESS	2	/* one link, or an ECMP pair */

struct port {
	char name[IF_NAMESIZE];
	int ifindex;
	int fd;
	uint64_t rx, tx, tx_err, pfc_sent;
	uint64_t rx_overflow;	/* frames the kernel dropped before we read them */
	struct srn_swp pause;	/* --pause-dir: the record of this ingress port */
};

struct mac_entry {
	uint8_t mac[6];
	int port;
};

struct sw {
	struct port port[MAX_PORTS];
	int nports;
	int egress;			/* index of the queued port (the bridge's view) */
	int neg;			/* egress links: 1, or 2 with --ecmp */
	int eg[MAX_EGRESS];		/* their port indices; eg[0] == egress */
	struct srn_swq q[MAX_EGRESS];	/* one queue per egress link */
	bool paused;			/* ingress paused: some queue above XOFF */
	uint64_t pause_sent_ns;		/* the last pause frames and records */
	struct srn_swf_table flows;
	struct mac_entry macs[MAC_TABLE];
	int nmacs;
	uint64_t flooded;
	FILE *stats;
	uint64_t interval_ns;
	uint64_t last_arrival_ns;	/* queue time never runs backwards: */
	uint64_t last_drain_ns;		/* not before the last arrival nor the last drain */
	uint64_t late_frames;		/* frames read more than 1 ms after they arrived */
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

void srn_usage_switch(FILE *out)
{
	fprintf(out,
		"Usage: softrnic switch [options] PORT PORT...\n"
		"\n"
		"An emulated switch between network interfaces (e.g. veths into network\n"
		"namespaces): a learning bridge that forwards whole Ethernet frames, with\n"
		"one egress port that has a rate, a buffer, RED-style ECN marking, tail\n"
		"drop and PFC-style pause.  Needs CAP_NET_RAW.  Stops on SIGINT/SIGTERM\n"
		"or after --duration, then prints a summary.\n"
		"\n"
		"Options:\n"
		"  --egress PORT        the congested port (default: the last PORT)\n"
		"  --rate RATE          egress rate in bit/s, suffix k/M/G (default: unlimited)\n"
		"  --buffer BYTES       egress buffer, suffix K/M (default 1M)\n"
		"  --ecn KMIN,KMAX,PMAX mark CE with probability rising from 0 at KMIN bytes\n"
		"                       to PMAX (0..1) at KMAX, 1 above (default: off)\n"
		"  --mark-dequeue       decide the mark as a frame leaves the queue, not as it\n"
		"                       joins: the receiver sees it a queue delay sooner\n"
		"  --pfc XOFF,XON       pause the ingress ports at XOFF bytes, resume at XON\n"
		"  --pause-dir DIR      also publish each ingress port's pause in DIR/PORT.pause\n"
		"                       for softrnic senders (SOFTRNIC_PAUSE_FILE=DIR/PORT.pause)\n"
		"  --ecmp PORT          a second egress link to the same place: flows are\n"
		"                       hashed over the two by 5-tuple, each with its own queue\n"
		"  --interval MS        a stats block every MS ms (default 1000)\n"
		"  --stats FILE         where stats go (default: stderr)\n"
		"  --duration SECS      stop after SECS seconds\n"
		"  --seed N             marking PRNG seed\n"
		"\n"
		"Stats lines: t=SECS port=NAME qbytes= qmax= enq= tx= marks= not_ect= drops=\n"
		"pauses= paused_ms= flooded= late= (frames read over 1 ms after they arrived:\n"
		"the queue takes each at its arrival time) clock= (CLOCK_MONOTONIC seconds) for\n"
		"each egress queue; per port rx= rx_overflow= (frames the kernel dropped before the switch\n"
		"read them) tx= tx_err= pfc_sent=; then one line per flow (5-tuple): pkts=\n"
		"bytes= mbps= marks= drops= (and link=NAME with --ecmp).\n");
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* "100M" -> 100e6; k/M/G are powers of 1000 for rates, of 1024 for sizes. */
static int parse_scaled(const char *s, double base, uint64_t *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v < 0)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v *= base; end++; break;
	case 'm': case 'M': v *= base * base; end++; break;
	case 'g': case 'G': v *= base * base * base; end++; break;
	default: break;
	}
	if (*end || v > 1e15)
		return -EINVAL;
	*out = (uint64_t)v;
	return 0;
}

static int parse_triple(const char *s, uint32_t *a, uint32_t *b, double *c, bool want_c)
{
	char buf[128], *p2, *p3;
	uint64_t x, y;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	p2 = strchr(buf, ',');
	if (!p2)
		return -EINVAL;
	*p2++ = 0;
	p3 = strchr(p2, ',');
	if ((p3 != NULL) != want_c)
		return -EINVAL;
	if (p3)
		*p3++ = 0;
	if (parse_scaled(buf, 1024, &x) || parse_scaled(p2, 1024, &y) || x > UINT32_MAX ||
	    y > UINT32_MAX)
		return -EINVAL;
	*a = (uint32_t)x;
	*b = (uint32_t)y;
	if (p3) {
		char *end;

		*c = strtod(p3, &end);
		if (end == p3 || *end || *c < 0 || *c > 1)
			return -EINVAL;
	}
	return 0;
}

static int open_port(struct port *p)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL) };
	struct packet_mreq mr = { .mr_type = PACKET_MR_PROMISC };
	/* The socket buffer is the port's ingress buffer while the switch
	 * waits for a CPU: a frame it has no room for is lost, and on a
	 * loaded 2-CPU host (the incast test next to an ASan suite) 4 MiB
	 * overflowed before the switch could run and send its pause.  Forced
	 * past net.core.rmem_max (root: the switch runs in namespaces it
	 * made), else as large as that allows. */
	int one = 1, rcvbuf = 16 << 20;

	p->ifindex = (int)if_nametoindex(p->name);
	if (!p->ifindex)
		return -errno;
	/* Protocol 0 until bound: no frame of another interface slips in. */
	p->fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p->fd < 0)
		return -errno;
	sll.sll_ifindex = p->ifindex;
	mr.mr_ifindex = p->ifindex;
	if (setsockopt(p->fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) ||
	    setsockopt(p->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) ||
	    setsockopt(p->fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) ||
	    (setsockopt(p->fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) &&
	     setsockopt(p->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf))) ||
	    setsockopt(p->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) ||
	    bind(p->fd, (struct sockaddr *)&sll, sizeof(sll)))
		return -errno;
	return 0;
}

static void port_send(struct port *p, const uint8_t *data, uint32_t len)
{
	/* A full device queue or a refused frame is a loss on the wire,
	 * counted, not retried. */
	if (send(p->fd, data, len, MSG_DONTWAIT) == (ssize_t)len)
		p->tx++;
	else
		p->tx_err++;
}

/* An 802.1Qbb PFC frame out of port p: all eight priorities, quanta
 * (512 bit times each) 0xffff to pause, 0 to resume. */
static void send_pfc(struct port *p, uint16_t quanta)
{
	static const uint8_t dst[6] = { 0x01, 0x80, 0xc2, 0x00, 0x00, 0x01 };
	uint8_t f[VNET_LEN + 64] = { 0 };
	uint8_t *e = f + VNET_LEN;

	memcpy(e, dst, 6);
	e[6] = 0x02;	/* a locally administered source MAC: the switch */
	e[11] = (uint8_t)p->ifindex;
	e[12] = PFC_ETHERTYPE >> 8;
	e[13] = PFC_ETHERTYPE & 0xff;
	e[14] = PFC_OPCODE >> 8;
	e[15] = PFC_OPCODE & 0xff;
	e[17] = 0xff;	/* priority enable vector */
	for (int i = 0; i < 8; i++) {
		e[18 + 2 * i] = (uint8_t)(quanta >> 8);
		e[19 + 2 * i] = (uint8_t)quanta;
	}
	port_send(p, f, sizeof(f));
	p->pfc_sent++;
}

static bool is_egress(const struct sw *s, int port)
{
	for (int k = 0; k < s->neg; k++)
		if (s->eg[k] == port)
			return true;
	return false;
}

/* Pause (or refresh the pause of) every ingress port, or resume them:
 * the PFC frame on the wire, and the record softrnic senders read. */
static void pfc_all_ingress(struct sw *s, bool pause, uint64_t now)
{
	for (int i = 0; i < s->nports; i++) {
		if (is_egress(s, i))
			continue;
		send_pfc(&s->port[i], pause ? PFC_QUANTA : 0);
		if (pause)
			srn_swp_pause(&s->port[i].pause, now, PAUSE_LEASE_NS);
		else
			srn_swp_resume(&s->port[i].pause, now);
	}
	s->pause_sent_ns = now;
}

/* The ingress is paused while any egress queue is above its XOFF. */
static void pfc_update(struct sw *s, uint64_t now)
{
	bool any = false;

	for (int k = 0; k < s->neg; k++) {
		srn_swq_pfc_update(&s->q[k], now);
		any |= s->q[k].paused;
	}
	if (any != s->paused) {
		s->paused = any;
		pfc_all_ingress(s, any, now);
	} else if (any && now - s->pause_sent_ns >= PAUSE_REFRESH_NS) {
		pfc_all_ingress(s, true, now);
	}
}

/* Learn the source, find the destination: a port index, or -1 to flood. */
static int bridge(struct sw *s, const uint8_t *eth, int in)
{
	int out = -1, slot = -1;

	for (int i = 0; i < s->nmacs; i++) {
		if (!memcmp(s->macs[i].mac, eth + 6, 6))
			slot = i;
		if (!(eth[0] & 1) && !memcmp(s->macs[i].mac, eth, 6))
			out = s->macs[i].port;
	}
	if (slot < 0 && !(eth[6] & 1)) {
		slot = s->nmacs < MAC_TABLE ? s->nmacs++ : (int)(eth[11] % MAC_TABLE);
		memcpy(s->macs[slot].mac, eth + 6, 6);
	}
	if (slot >= 0)
		s->macs[slot].port = in;	/* callers pass an ECMP member as s->egress */
	return out == in ? -2 : out;	/* -2: for the port it came from, drop */
}

static void to_egress(struct sw *s, uint8_t *buf, uint32_t len, uint64_t now)
{
	struct srn_swf_key key;
	int l3 = srn_swf_parse(buf + VNET_LEN, len - VNET_LEN, &key);
	int fl = l3 >= 0 ? srn_swf_lookup(&s->flows, &key) : -1;
	/* ECMP: a flow's hash picks its link; non-IP frames hash their MACs. */
	int link = s->neg > 1 ? (int)((l3 >= 0 ? srn_swf_hash(&key) :
					srn_swf_hash_bytes(buf + VNET_LEN, 12)) % (uint32_t)s->neg) : 0;
	struct srn_swq *q = &s->q[link];
	struct srn_swq_frame f = {
		.len = len,
		.wire_len = len - VNET_LEN,
		.l3_off = l3 >= 0 ? VNET_LEN + (uint32_t)l3 : len,
		.flow = fl,
	};
	enum srn_swq_verdict v;

	f.data = malloc(len);
	if (!f.data) {
		q->dropped++;
		return;
	}
	memcpy(f.data, buf, len);
	v = srn_swq_enqueue(q, &f, now);
	if (v == SRN_SWQ_DROPPED)
		free(f.data);
	if (fl >= 0) {
		s->flows.f[fl].marks += v == SRN_SWQ_MARKED;
		s->flows.f[fl].drops += v == SRN_SWQ_DROPPED;
		s->flows.f[fl].link = (uint8_t)link;
	}
	pfc_update(s, now);
}

static void drain(struct sw *s, uint64_t now);

/* When the frame in h arrived, on our clock: the kernel's receive
 * timestamp (CLOCK_REALTIME, moved by real_off), never later than now
 * nor earlier than the last arrival queued. */
static uint64_t arrival_ns(struct sw *s, struct msghdr *h, int64_t real_off, uint64_t now)
{
	uint64_t t = now;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
			struct timespec ts;
			memcpy(&ts, CMSG_DATA(c), sizeof(ts));
			int64_t real = (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
			int64_t mono = real - real_off;
			if (mono > 0 && (uint64_t)mono < now)
				t = (uint64_t)mono;
		}
	if (now - t > 1000000ull)
		s->late_frames++;
	if (t < s->last_arrival_ns)
		t = s->last_arrival_ns;
	if (t < s->last_drain_ns)
		t = s->last_drain_ns;
	s->last_arrival_ns = t;
	return t;
}

static void receive(struct sw *s, int in, uint8_t *buf, uint64_t now)
{
	/* The two clocks read together: real - mono, to move the kernel's
	 * receive timestamps onto ours. */
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	int64_t real_off = (int64_t)rt.tv_sec * 1000000000ll + rt.tv_nsec - (int64_t)now_ns();
	/* Bounded batch per port per round, so one busy port cannot starve
	 * the others or the egress. */
	for (int n = 0; n < 64; n++) {
		/* A paused link delivers nothing more: the rest of the batch
		 * waits in the socket, upstream of the pause. */
		if (s->paused && !is_egress(s, in))
			return;
		union {
			struct cmsghdr c;
			uint8_t b[CMSG_SPACE(sizeof(struct timespec)) * 2];
		} ctl;
		struct iovec iov = { buf, FRAME_MAX };
		struct msghdr h = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl,
				    .msg_controllen = sizeof(ctl) };
		ssize_t r = recvmsg(s->port[in].fd, &h, MSG_DONTWAIT);
		uint32_t len;
		int out;

		if (r < 0)
			return;
		len = (uint32_t)r;
		/* The queue sees the frame when it reached the port, not when
		 * this process got the CPU to read it: departures due before
		 * then go first.  A switch stalled for 10 ms would otherwise
		 * find 10 ms of arrivals at once and drop what no real switch,
		 * draining all along, would have. */
		uint64_t at = arrival_ns(s, &h, real_off, now);
		if (!is_egress(s, in))
			drain(s, at);
		if (len < VNET_LEN + ETHER_HDR_LEN)
			continue;
		s->port[in].rx++;
		((struct virtio_net_hdr *)buf)->flags &= VIRTIO_NET_HDR_F_NEEDS_CSUM;
		/* Both ECMP links are the egress port to the bridge. */
		out = bridge(s, buf + VNET_LEN, is_egress(s, in) ? s->egress : in);
		if (out == -2)
			continue;
		if (out < 0) {
			s->flooded++;
			/* Flooded frames join the egress queue like any
			 * other frame for that port. */
			for (int i = 0; i < s->nports; i++)
				if (i == s->egress && !is_egress(s, in))
					to_egress(s, buf, len, at);
				else if (i != in && !is_egress(s, i))
					port_send(&s->port[i], buf, len);
		} else if (out == s->egress) {
			to_egress(s, buf, len, at);
		} else {
			port_send(&s->port[out], buf, len);
		}
	}
}

static void drain(struct sw *s, uint64_t now)
{
	struct srn_swq_frame f;

	if (now > s->last_drain_ns)
		s->last_drain_ns = now;
	for (int k = 0; k < s->neg; k++) {
		for (int n = 0; n < 4096 && srn_swq_dequeue(&s->q[k], now, &f); n++) {
			port_send(&s->port[s->eg[k]], f.data, f.len);
			if (f.flow >= 0) {
				s->flows.f[f.flow].marks += f.marked;
				s->flows.f[f.flow].pkts++;
				s->flows.f[f.flow].bytes += f.wire_len;
			}
			free(f.data);
		}
	}
	pfc_update(s, now);
}

/* PACKET_STATISTICS: frames the port's socket buffer had no room for
 * (read-and-reset by the kernel, so accumulate). */
static void read_overflow(struct port *p)
{
	struct tpacket_stats st;
	socklen_t len = sizeof(st);

	if (getsockopt(p->fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0)
		p->rx_overflow += st.tp_drops;
}

static void print_stats(struct sw *s, FILE *out, uint64_t t0, uint64_t now, uint64_t dt)
{
	double t = (double)(now - t0) / 1e9;

	for (int k = 0; k < s->neg; k++) {
		struct srn_swq *q = &s->q[k];

		fprintf(out, "t=%.3f port=%s qbytes=%llu qmax=%llu enq=%llu tx=%llu marks=%llu "
			"not_ect=%llu drops=%llu pauses=%llu paused_ms=%.3f flooded=%llu late=%llu "
			"clock=%.3f\n",
			t, s->port[s->eg[k]].name, (unsigned long long)q->bytes,
			(unsigned long long)q->max_bytes, (unsigned long long)q->enqueued,
			(unsigned long long)q->departed, (unsigned long long)q->marked,
			(unsigned long long)q->not_ect, (unsigned long long)q->dropped,
			(unsigned long long)q->pauses, (double)srn_swq_paused_ns(q, now) / 1e6,
			(unsigned long long)s->flooded, (unsigned long long)s->late_frames,
			(double)now / 1e9);
	}
	for (int i = 0; i < s->nports; i++) {
		read_overflow(&s->port[i]);
		fprintf(out, "t=%.3f port=%s rx=%llu rx_overflow=%llu tx=%llu tx_err=%llu "
			"pfc_sent=%llu\n", t, s->port[i].name, (unsigned long long)s->port[i].rx,
			(unsigned long long)s->port[i].rx_overflow, (unsigned long long)s->port[i].tx,
			(unsigned long long)s->port[i].tx_err, (unsigned long long)s->port[i].pfc_sent);
	}
	{
		const char *links[MAX_EGRESS];

		for (int k = 0; k < s->neg; k++)
			links[k] = s->port[s->eg[k]].name;
		srn_swf_print(&s->flows, out, t, dt, s->neg > 1 ? links : NULL);
	}
	fflush(out);
}

static int run(struct sw *s, double duration)
{
	static uint8_t buf[FRAME_MAX];
	uint64_t t0 = now_ns(), next_stats = t0 + s->interval_ns, last_stats = t0;
	uint64_t end = duration > 0 ? t0 + (uint64_t)(duration * 1e9) : UINT64_MAX;
	struct pollfd pfd[MAX_PORTS];

	while (!stop) {
		uint64_t now = now_ns(), wake = next_stats;
		struct timespec ts;
		int np = 0;

		if (now >= end)
			break;
		drain(s, now);
		for (int k = 0; k < s->neg; k++)
			if (srn_swq_next_ns(&s->q[k]) < wake)
				wake = srn_swq_next_ns(&s->q[k]);
		if (s->paused && s->pause_sent_ns + PAUSE_REFRESH_NS < wake)
			wake = s->pause_sent_ns + PAUSE_REFRESH_NS;
		if (end < wake)
			wake = end;
		/* While paused, only the egress port is read (its frames go
		 * the other way and do not feed the queue). */
		for (int i = 0; i < s->nports; i++) {
			pfd[i] = (struct pollfd){ .fd = s->port[i].fd, .events = POLLIN };
			if (s->paused && !is_egress(s, i))
				pfd[i].fd = -1;
			np++;
		}
		ts.tv_sec = wake > now ? (time_t)((wake - now) / 1000000000ull) : 0;
		ts.tv_nsec = wake > now ? (long)((wake - now) % 1000000000ull) : 0;
		if (ppoll(pfd, (nfds_t)np, &ts, NULL) < 0 && errno != EINTR)
			return -errno;
		now = now_ns();
		for (int i = 0; i < s->nports; i++)
			if (pfd[i].fd >= 0 && (pfd[i].revents & POLLIN))
				receive(s, i, buf, now);
		if (now >= next_stats) {
			print_stats(s, s->stats, t0, now, now - last_stats);
			last_stats = now;
			next_stats = now + s->interval_ns;
		}
	}
	print_stats(s, stdout, t0, now_ns(), now_ns() - last_stats);
	return 0;
}

/* What the command line asks of the switch beyond struct sw. */
struct sw_args {
	struct srn_swq_cfg qc;
	const char *egress, *stats_path, *pause_dir, *ecmp;
	double duration;
	uint64_t seed;
};

/* The options into s and a.  Returns -1 when parsed, else the exit status. */
static int parse_switch_opts(int argc, char *argv[], struct sw *s, struct sw_args *a)
{
	static const struct option longopts[] = {
		{ "egress", required_argument, NULL, 'e' },
		{ "rate", required_argument, NULL, 'r' },
		{ "buffer", required_argument, NULL, 'b' },
		{ "ecn", required_argument, NULL, 'E' },
		{ "mark-dequeue", no_argument, NULL, 'Q' },
		{ "pfc", required_argument, NULL, 'P' },
		{ "interval", required_argument, NULL, 'i' },
		{ "stats", required_argument, NULL, 's' },
		{ "duration", required_argument, NULL, 'd' },
		{ "seed", required_argument, NULL, 'S' },
		{ "pause-dir", required_argument, NULL, 'D' },
		{ "ecmp", required_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct srn_swq_cfg *qc = &a->qc;
	uint64_t v;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'e': a->egress = optarg; break;
		case 'r':
			if (parse_scaled(optarg, 1000, &qc->rate_bps))
				goto usage;
			break;
		case 'b':
			if (parse_scaled(optarg, 1024, &v) || v > UINT32_MAX)
				goto usage;
			qc->buffer = (uint32_t)v;
			break;
		case 'E':
			if (parse_triple(optarg, &qc->kmin, &qc->kmax, &qc->pmax, true))
				goto usage;
			qc->ecn = true;
			break;
		case 'Q': qc->mark_dequeue = true; break;
		case 'P':
			if (parse_triple(optarg, &qc->xoff, &qc->xon, NULL, false) || qc->xon > qc->xoff)
				goto usage;
			qc->pfc = true;
			break;
		case 'i':
			if (parse_scaled(optarg, 1000, &v) || v == 0)
				goto usage;
			s->interval_ns = v * 1000000ull;
			break;
		case 's': a->stats_path = optarg; break;
		case 'd': a->duration = strtod(optarg, NULL); break;
		case 'S': a->seed = strtoull(optarg, NULL, 0); break;
		case 'D': a->pause_dir = optarg; break;
		case 'M': a->ecmp = optarg; break;
		case 'h': srn_usage_switch(stdout); return SRN_EXIT_OK;
		default: goto usage;
		}
	}
	return -1;
usage:
	srn_usage_switch(stderr);
	return SRN_EXIT_USAGE;
}

/* The ports named after the options, the egress link and the ECMP one.
 * Returns 0, or -1 for a usage error. */
static int take_ports(struct sw *s, int argc, char *argv[], const struct sw_args *a)
{
	if (argc - optind < 2 || argc - optind > MAX_PORTS)
		return -1;
	s->egress = -1;
	s->neg = 1;
	s->eg[1] = -1;
	for (int i = optind; i < argc; i++) {
		struct port *p = &s->port[s->nports];

		if (strlen(argv[i]) >= IF_NAMESIZE)
			return -1;
		strcpy(p->name, argv[i]);
		if (a->egress && !strcmp(a->egress, argv[i]))
			s->egress = s->nports;
		if (a->ecmp && !strcmp(a->ecmp, argv[i]))
			s->eg[1] = s->nports;
		s->nports++;
	}
	if (!a->egress)
		s->egress = s->nports - 1;
	if (s->egress < 0)
		return -1;
	s->eg[0] = s->egress;
	if (a->ecmp) {
		/* The second link must be one of the ports, not the first. */
		if (s->eg[1] < 0 || s->eg[1] == s->egress || s->nports < 3)
			return -1;
		s->neg = 2;
	}
	return 0;
}

/* The ports' sockets, the stats file, the egress queues and the pause
 * records.  Returns 0, or SRN_EXIT_FAIL after saying why. */
static int open_all(struct sw *s, const struct sw_args *a)
{
	for (int i = 0; i < s->nports; i++) {
		int err = open_port(&s->port[i]);
		if (err) {
			fprintf(stderr, "softrnic switch: port %s: %s\n", s->port[i].name, strerror(-err));
			return SRN_EXIT_FAIL;
		}
	}
	s->stats = stderr;
	if (a->stats_path && !(s->stats = fopen(a->stats_path, "w"))) {
		fprintf(stderr, "softrnic switch: %s: %s\n", a->stats_path, strerror(errno));
		return SRN_EXIT_FAIL;
	}
	for (int k = 0; k < s->neg; k++)
		srn_swq_init(&s->q[k], &a->qc, a->seed + (uint64_t)k);
	for (int i = 0; a->pause_dir && i < s->nports; i++) {
		if (is_egress(s, i))
			continue;
		int err = srn_swp_open(&s->port[i].pause, a->pause_dir, s->port[i].name);
		if (err) {
			fprintf(stderr, "softrnic switch: pause record %s/%s.pause: %s\n",
				a->pause_dir, s->port[i].name, strerror(-err));
			return SRN_EXIT_FAIL;
		}
	}
	return 0;
}

static void close_all(struct sw *s)
{
	for (int k = 0; k < s->neg; k++)
		srn_swq_fini(&s->q[k]);
	for (int i = 0; i < s->nports; i++) {
		/* Nobody stays paused by a switch that is gone. */
		srn_swp_resume(&s->port[i].pause, now_ns());
		srn_swp_close(&s->port[i].pause);
		close(s->port[i].fd);
	}
	if (s->stats != stderr)
		fclose(s->stats);
}

int srn_cmd_switch(int argc, char *argv[])
{
	static struct sw s;
	struct sw_args a = { .qc = { .buffer = 1u << 20 }, .seed = 1 };

	memset(&s, 0, sizeof(s));
	s.interval_ns = 1000000000ull;
	int rc = parse_switch_opts(argc, argv, &s, &a);
	if (rc >= 0)
		return rc;
	if (take_ports(&s, argc, argv, &a)) {
		srn_usage_switch(stderr);
		return SRN_EXIT_USAGE;
	}
	rc = open_all(&s, &a);
	if (rc)
		return rc;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	fprintf(stderr, "softrnic switch: %d ports, egress %s%s%s\n", s.nports,
		s.port[s.egress].name, s.neg > 1 ? " + ECMP " : "", s.neg > 1 ? s.port[s.eg[1]].name : "");
	int err = run(&s, a.duration);
	close_all(&s);
	if (err) {
		fprintf(stderr, "softrnic switch: %s\n", strerror(-err));
		return SRN_EXIT_FAIL;
	}
	return SRN_EXIT_OK;
}
