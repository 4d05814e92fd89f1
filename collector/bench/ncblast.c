// SPDX-License-Identifier: GPL-2.0
/*
 * ncblast: extended netconsole records, as netconsole.ko sends them, from
 * many sources at a steady rate, for the netconsole benchmark (ncbench.py).
 *
 *	ncblast PORT SOURCES COUNT RATE [SEQ0]
 *
 * Sends COUNT records in all to 127.0.0.1:PORT, round robin from SOURCES
 * sockets bound to 127.0.1.1, 127.0.1.2, ... (one "machine" each, source
 * port 6665), at RATE records a second (0: as fast as it can), in
 * sendmmsg() batches.  Each source's sequence numbers run from SEQ0 on.
 * A record: "<6>,<seq>,<usec>,-;ncblast <source> record <seq> ...", about
 * 120 bytes of text, then the sysdata lines " cpu=1" and " taskname=...".
 * Prints "sent N in S s" (and the rate) when done.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH	32
#define MSG_MAX	512

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static char bufs[BATCH][MSG_MAX];
	struct sockaddr_in to = { .sin_family = AF_INET };
	struct mmsghdr msgs[BATCH];
	struct iovec iovs[BATCH];
	long count, sent = 0, seq0, *seqs;
	double rate, start, t;
	int nsrc, *fds, i;

	if (argc < 5) {
		fprintf(stderr, "usage: %s PORT SOURCES COUNT RATE [SEQ0]\n", argv[0]);
		return 2;
	}
	to.sin_port = htons(atoi(argv[1]));
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	nsrc = atoi(argv[2]);
	count = atol(argv[3]);
	rate = atof(argv[4]);
	seq0 = argc > 5 ? atol(argv[5]) : 0;
	if (nsrc < 1 || nsrc > 250 || count < 1) {
		fprintf(stderr, "ncblast: 1 to 250 sources, a positive count\n");
		return 2;
	}
	fds = calloc(nsrc, sizeof(*fds));
	seqs = calloc(nsrc, sizeof(*seqs));
	for (i = 0; i < nsrc; i++) {
		struct sockaddr_in from = { .sin_family = AF_INET, .sin_port = htons(6665) };
		int sndbuf = 4 << 20;

		from.sin_addr.s_addr = htonl(0x7f000101 + i);
		fds[i] = socket(AF_INET, SOCK_DGRAM, 0);
		setsockopt(fds[i], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
		if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&from, sizeof(from)) < 0) {
			perror("ncblast: socket/bind");
			return 1;
		}
	}
	memset(msgs, 0, sizeof(msgs));
	start = now();
	while (sent < count) {
		/* one batch per source in turn: BATCH records of one machine */
		int src = (sent / BATCH) % nsrc, n = 0;

		for (i = 0; i < BATCH && sent + n < count; i++, n++) {
			long seq = seq0 + seqs[src]++;
			int len = snprintf(bufs[i], MSG_MAX,
					   "6,%ld,%ld,-;ncblast 127.0.1.%d record %ld: "
					   "the quick brown fox jumps over the lazy dog "
					   "while the kernel logs its way to the end\n"
					   " cpu=1\n taskname=kworker/1:2\n",
					   seq, 1000000 + seq * 10, src + 1, seq);

			iovs[i].iov_base = bufs[i];
			iovs[i].iov_len = len;
			msgs[i].msg_hdr.msg_iov = &iovs[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
			msgs[i].msg_hdr.msg_name = &to;
			msgs[i].msg_hdr.msg_namelen = sizeof(to);
		}
		for (i = 0; i < n; ) {
			int got = sendmmsg(fds[src], msgs + i, n - i, 0);

			if (got < 0) {
				if (errno == EINTR || errno == ENOBUFS || errno == EAGAIN)
					continue;
				perror("ncblast: sendmmsg");
				return 1;
			}
			i += got;
		}
		sent += n;
		/* ahead of the rate: sleep (a spinning sender would take a CPU
		 * from the receivers) */
		if (rate > 0 && (t = sent / rate - (now() - start)) > 0) {
			struct timespec ts = { 0, (long)(t * 1e9) };

			nanosleep(&ts, NULL);
		}
	}
	t = now() - start;
	printf("sent %ld in %.3f s (%.0f/s)\n", sent, t, sent / t);
	return 0;
}
