/*
 * fuzz_driver.c - a bounded, seeded mutation loop around a libFuzzer
 * harness, so every harness (LLVMFuzzerTestOneInput) also runs in CTest
 * with gcc, in the normal and the ASan/UBSan builds.  With Clang the same
 * harness is also linked against libFuzzer proper (tests/fuzz.cmake) for
 * long coverage-guided runs; this driver is the short regression pass.
 *
 *   fuzz_x [-runs=N] [-max_len=N] [-seed=N] [-max_total_time=S] [SEED_FILE...]
 *
 * Inputs start from the seed files (or from empty buffers) and are mutated
 * by bit flips, byte overwrites with boundary values, truncation, growth
 * with random bytes and block copies: enough to walk every length check a
 * parser has.  Same seed, same inputs, so a failure reproduces.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SEEDS 64

struct seed {
	uint8_t *data;
	size_t len;
};

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* splitmix64: tiny, seedable, good enough to pick mutations. */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static size_t below(size_t n)
{
	return n ? (size_t)(rng() % n) : 0;
}

static int load_seed(const char *path, struct seed *s, size_t max_len)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f) {
		perror(path);
		return -1;
	}
	s->data = malloc(max_len);
	if (!s->data) {
		fclose(f);
		return -1;
	}
	n = fread(s->data, 1, max_len, f);
	fclose(f);
	s->len = n;
	return 0;
}

/* Values that sit on the edges of length and index checks. */
static const uint8_t interesting[] = { 0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff, 0x10, 0x40 };

static size_t mutate(uint8_t *buf, size_t len, size_t max_len)
{
	int n = 1 + (int)below(8);

	for (int i = 0; i < n; i++) {
		switch (below(6)) {
		case 0: /* flip a bit */
			if (len)
				buf[below(len)] ^= (uint8_t)(1u << below(8));
			break;
		case 1: /* a boundary byte */
			if (len)
				buf[below(len)] = interesting[below(sizeof(interesting))];
			break;
		case 2: /* a random byte */
			if (len)
				buf[below(len)] = (uint8_t)rng();
			break;
		case 3: /* truncate */
			len = below(len + 1);
			break;
		case 4: /* grow with random bytes */
			if (len < max_len) {
				size_t add = 1 + below(max_len - len);

				for (size_t k = 0; k < add; k++)
					buf[len + k] = (uint8_t)rng();
				len += add;
			}
			break;
		default: /* copy a block within the input */
			if (len > 1) {
				size_t from = below(len), to = below(len);
				size_t cnt = 1 + below(len - (from > to ? from : to));

				memmove(buf + to, buf + from, cnt);
			}
			break;
		}
	}
	return len;
}

static long arg_num(const char *arg, const char *name, long def)
{
	size_t n = strlen(name);

	if (strncmp(arg, name, n) == 0 && arg[n] == '=')
		return strtol(arg + n + 1, NULL, 0);
	return def;
}

int main(int argc, char **argv)
{
	long runs = 20000, max_len = 4096, seed = 1, max_time = 60;
	struct seed seeds[MAX_SEEDS];
	int nseeds = 0;
	uint8_t *buf;
	time_t start = time(NULL);

	for (int i = 1; i < argc; i++) {
		if (argv[i][0] == '-') {
			runs = arg_num(argv[i], "-runs", runs);
			max_len = arg_num(argv[i], "-max_len", max_len);
			seed = arg_num(argv[i], "-seed", seed);
			max_time = arg_num(argv[i], "-max_total_time", max_time);
		} else if (nseeds < MAX_SEEDS) {
			if (load_seed(argv[i], &seeds[nseeds], (size_t)max_len))
				return 1;
			nseeds++;
		}
	}
	if (max_len < 1 || runs < 0)
		return 1;
	buf = malloc((size_t)max_len);
	if (!buf)
		return 1;
	rng_state = (uint64_t)seed;

	/* Every seed once as it is, then mutants. */
	for (int i = 0; i < nseeds; i++) {
		memcpy(buf, seeds[i].data, seeds[i].len);
		LLVMFuzzerTestOneInput(buf, seeds[i].len);
	}
	long done = 0;
	for (; done < runs; done++) {
		size_t len = 0;

		if (nseeds && below(8)) {
			struct seed *s = &seeds[below((size_t)nseeds)];

			memcpy(buf, s->data, s->len);
			len = s->len;
		}
		len = mutate(buf, len, (size_t)max_len);
		/* A private copy of exactly len bytes, so ASan sees any
		 * read past the input. */
		uint8_t *in = malloc(len ? len : 1);

		if (!in)
			return 1;
		memcpy(in, buf, len);
		LLVMFuzzerTestOneInput(in, len);
		free(in);
		if ((done & 1023) == 0 && time(NULL) - start > max_time)
			break;
	}
	printf("%s: %ld inputs from %d seeds (seed %ld), no fault\n", argv[0], done + nseeds,
	       nseeds, seed);
	for (int i = 0; i < nseeds; i++)
		free(seeds[i].data);
	free(buf);
	return 0;
}
