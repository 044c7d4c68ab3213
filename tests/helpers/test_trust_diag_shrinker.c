/* test_trust_diag_shrinker - for test_trust_diag_shrink.sh: cuts a file
 * to SMALL bytes and restores its size, again and again, for SECS seconds
 * (at most 60), so that readers of the file see it shrink under them.
 * The bytes cut are lost (they read back as zeros): use a copy.
 *
 * Usage: test_trust_diag_shrinker FILE SMALL SECS
 * Prints "cycles N" at the end; exits 1 when it cannot open the file.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	int fd = open(argv[1], O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		perror(argv[1]);
		return 1;
	}
	off_t small = (off_t)strtoll(argv[2], NULL, 0);
	long secs = strtol(argv[3], NULL, 0);
	if (secs < 1 || secs > 60)
		secs = 60;
	time_t end = time(NULL) + secs;
	unsigned long cycles = 0;
	while (time(NULL) < end) {
		for (int i = 0; i < 64; i++, cycles++) {
			if (ftruncate(fd, small) || ftruncate(fd, st.st_size)) {
				perror("ftruncate");
				return 1;
			}
		}
	}
	printf("cycles %lu\n", cycles);
	return 0;
}
