/* Minimal reader of classic pcap files for tests (either byte order,
 * microsecond or nanosecond magic). Header-only: static functions. */
#ifndef SRN_TEST_PCAP_READ_H
#define SRN_TEST_PCAP_READ_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct pcap_reader {
    FILE *f;
    bool swap;
    uint32_t linktype;
    uint32_t snaplen;
};

static uint32_t pcap_u32(const struct pcap_reader *r, const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return r->swap ? __builtin_bswap32(v) : v;
}

/* 0, or -1 when the file is missing or not a pcap. */
static int pcap_open_read(struct pcap_reader *r, const char *path)
{
    uint8_t gh[24];
    memset(r, 0, sizeof(*r));
    r->f = fopen(path, "rb");
    if (!r->f)
        return -1;
    if (fread(gh, 1, sizeof(gh), r->f) != sizeof(gh))
        goto bad;
    uint32_t magic;
    memcpy(&magic, gh, 4);
    if (magic == 0xa1b2c3d4u || magic == 0xa1b23c4du)
        r->swap = false;
    else if (magic == 0xd4c3b2a1u || magic == 0x4d3cb2a1u)
        r->swap = true;
    else
        goto bad;
    r->snaplen = pcap_u32(r, gh + 16);
    r->linktype = pcap_u32(r, gh + 20);
    return 0;
bad:
    fclose(r->f);
    r->f = NULL;
    return -1;
}

/* 1 with a frame in buf, 0 at a clean end, -1 on a torn or oversized
 * record. */
static int pcap_next_frame(struct pcap_reader *r, uint8_t *buf, size_t cap, uint32_t *len)
{
    uint8_t rh[16];
    size_t got = fread(rh, 1, sizeof(rh), r->f);
    if (got == 0)
        return 0;
    if (got != sizeof(rh))
        return -1;
    uint32_t incl = pcap_u32(r, rh + 8), orig = pcap_u32(r, rh + 12);
    if (incl > cap || incl != orig)
        return -1;
    if (fread(buf, 1, incl, r->f) != incl)
        return -1;
    *len = incl;
    return 1;
}

static void pcap_close_read(struct pcap_reader *r)
{
    if (r->f)
        fclose(r->f);
    r->f = NULL;
}

#endif
