/* Helper of test_link_pcap.sh (not a test by itself): read a pcap file and
 * check every frame's RoCE ICRC independently of the code that wrote it
 * (srn_icrc_of_frame recomputes it from the captured IP/UDP headers).
 *
 *   pcap_icrc_check FILE...
 *
 * Prints one line per file: "FILE frames=N good=G bad=B undecodable=U".
 * Exit 0 when every file was read whole and had frames, all with a correct
 * ICRC; 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>

#include "pcap_read.h"
#include "wire/icrc.h"

static int check(const char *path)
{
	static uint8_t frame[1 << 18];
	struct pcap_reader r;
	if (pcap_open_read(&r, path)) {
		printf("%s: not a readable pcap file\n", path);
		return 1;
	}
	unsigned long frames = 0, good = 0, bad = 0, undecodable = 0;
	uint32_t len;
	int rc;
	while ((rc = pcap_next_frame(&r, frame, sizeof(frame), &len)) == 1) {
		uint32_t computed, on_wire;
		frames++;
		if (srn_icrc_of_frame(frame, len, &computed, &on_wire))
			undecodable++;
		else if (computed == on_wire)
			good++;
		else
			bad++;
	}
	pcap_close_read(&r);
	printf("%s frames=%lu good=%lu bad=%lu undecodable=%lu%s\n", path, frames, good, bad,
		   undecodable, rc < 0 ? " torn-record" : "");
	return (rc < 0 || r.linktype != 1 || frames == 0 || bad || undecodable) ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE.pcap...\n", argv[0]);
		return 2;
	}
	int fail = 0;
	for (int i = 1; i < argc; i++)
		fail |= check(argv[i]);
	return fail;
}
