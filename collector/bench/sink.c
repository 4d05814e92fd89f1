// SPDX-License-Identifier: GPL-2.0
/*
 * sink: the upper limit for the collector benchmark.  Counts UDP datagrams
 * with recvmmsg() and does nothing else.
 *
 *   sink PORT EXPECTED [RCVBUF]
 *
 * Binds 127.0.0.1:PORT (0: any free port), prints "ready PORT RCVBUF", then
 * receives until EXPECTED datagrams are in or nothing arrives for 3 s, and
 * prints "count N first T last T cpu_ms C" (CLOCK_REALTIME seconds of the
 * first and the last receive, and the CPU time it used).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#define BATCH 64
#define BUFSZ 2048

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static char bufs[BATCH][BUFSZ];
	struct mmsghdr msgs[BATCH];
	struct iovec iovs[BATCH];
	struct sockaddr_in addr = { .sin_family = AF_INET };
	struct timeval idle = { .tv_sec = 3 };
	socklen_t len = sizeof(addr);
	long expected, count = 0;
	double first = 0, last = 0;
	struct rusage ru;
	int fd, rcvbuf, i;

	if (argc < 3) {
		fprintf(stderr, "usage: %s PORT EXPECTED [RCVBUF]\n", argv[0]);
		return 2;
	}
	expected = atol(argv[2]);
	rcvbuf = argc > 3 ? atoi(argv[3]) : 8 << 20;
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0) {
		perror("socket");
		return 1;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof(idle));
	addr.sin_port = htons(atoi(argv[1]));
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		perror("bind");
		return 1;
	}
	getsockname(fd, (struct sockaddr *)&addr, &len);
	len = sizeof(rcvbuf);
	getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len);
	printf("ready %d %d\n", ntohs(addr.sin_port), rcvbuf);
	fflush(stdout);

	memset(msgs, 0, sizeof(msgs));
	for (i = 0; i < BATCH; i++) {
		iovs[i].iov_base = bufs[i];
		iovs[i].iov_len = BUFSZ;
		msgs[i].msg_hdr.msg_iov = &iovs[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	while (count < expected) {
		int n = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;		/* idle timeout */
		}
		last = now();
		if (!count)
			first = last;
		count += n;
	}
	getrusage(RUSAGE_SELF, &ru);
	printf("count %ld first %.6f last %.6f cpu_ms %.3f\n", count, first, last,
	       (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3);
	return 0;
}
