/*
 * test_wire_util.c - helpers shared by the wire tests (not a test itself):
 * loading the frame vectors of tests/data/roce-frames.tsv, hex decoding and
 * a seeded PRNG.  The tests declare what they use from here under a
 * "test_wire_util.c" comment; the vectors stay behind accessor functions
 * so no struct layout has to be repeated in each test.
 *
 * The TSV has one vector per line: id, frame hex, description; lines
 * starting with '#' are comments.  Loading is bounded (WT_MAX_VECS lines,
 * WT_MAX_FRAME bytes per frame).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define WT_MAX_VECS	64
#define WT_MAX_FRAME	2048

struct wt_vec {
	char id[16];
	uint8_t frame[WT_MAX_FRAME];
	size_t len;
};

static struct wt_vec vecs[WT_MAX_VECS];
static int nvecs;

int wt_load_vectors(const char *path);
const char *wt_vec_id(int i);
const uint8_t *wt_vec_frame(int i, size_t *len);
int wt_vec_find(const char *id);
int wt_hex(const char *hex, uint8_t *out, size_t max);
uint64_t wt_rand(uint64_t *state);

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Decode a hex string (ends at NUL or any non-hex char); -1 on odd
 * length or overflow. */
int wt_hex(const char *hex, uint8_t *out, size_t max)
{
	size_t n = 0;

	while (hexval((unsigned char)hex[0]) >= 0) {
		int hi = hexval((unsigned char)hex[0]);
		int lo = hexval((unsigned char)hex[1]);

		if (lo < 0 || n >= max)
			return -1;
		out[n++] = (uint8_t)(hi << 4 | lo);
		hex += 2;
	}
	return (int)n;
}

/* Returns the number of vectors loaded, or -1. */
int wt_load_vectors(const char *path)
{
	static char line[2 * WT_MAX_FRAME + 1024];
	FILE *fp;

	fp = fopen(path, "r");
	if (!fp) {
		perror(path);
		return -1;
	}
	nvecs = 0;
	while (nvecs < WT_MAX_VECS && fgets(line, sizeof(line), fp)) {
		struct wt_vec *v = &vecs[nvecs];
		char *tab = strchr(line, '\t');
		int len;

		if (line[0] == '#' || !tab)
			continue;
		if ((size_t)(tab - line) >= sizeof(v->id))
			continue;
		memcpy(v->id, line, (size_t)(tab - line));
		v->id[tab - line] = 0;
		len = wt_hex(tab + 1, v->frame, sizeof(v->frame));
		if (len <= 0) {
			fprintf(stderr, "%s: bad hex for %s\n", path, v->id);
			fclose(fp);
			return -1;
		}
		v->len = (size_t)len;
		nvecs++;
	}
	fclose(fp);
	return nvecs;
}

const char *wt_vec_id(int i)
{
	return vecs[i].id;
}

const uint8_t *wt_vec_frame(int i, size_t *len)
{
	*len = vecs[i].len;
	return vecs[i].frame;
}

int wt_vec_find(const char *id)
{
	for (int i = 0; i < nvecs; i++)
		if (!strcmp(vecs[i].id, id))
			return i;
	return -1;
}

/* splitmix64: small, seedable, good enough to spread test inputs. */
uint64_t wt_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
