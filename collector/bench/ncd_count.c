// SPDX-License-Identifier: GPL-2.0
/*
 * A netconsd output module for the netconsole benchmark (ncbench.py): it
 * only counts the messages netconsd hands it, and prints the count with
 * the time (CLOCK_REALTIME) of the last one every time it is asked by
 * SIGUSR2-free polling: a line "count N last T" on stderr each 100 ms
 * while the count changes, and at exit.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

struct in6_addr;
struct msg_buf;
struct ncrx_msg;

static atomic_ulong count;
static _Atomic double last;
static atomic_int stopping;
static pthread_t reporter;

static double wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *report(void *arg)
{
	unsigned long seen = 0;

	(void)arg;
	while (!atomic_load(&stopping)) {
		unsigned long c = atomic_load(&count);

		if (c != seen) {
			fprintf(stderr, "count %lu last %.6f\n", c, atomic_load(&last));
			seen = c;
		}
		usleep(100000);
	}
	return NULL;
}

int netconsd_output_init(int nr_workers)
{
	(void)nr_workers;
	return pthread_create(&reporter, NULL, report, NULL);
}

void netconsd_output_handler(int t, struct in6_addr *src, struct msg_buf *b,
			     struct ncrx_msg *m)
{
	(void)t;
	(void)src;
	(void)b;
	(void)m;
	atomic_fetch_add(&count, 1);
	atomic_store(&last, wall());
}

void netconsd_output_exit(void)
{
	atomic_store(&stopping, 1);
	pthread_join(reporter, NULL);
	fprintf(stderr, "count %lu last %.6f\n", atomic_load(&count), atomic_load(&last));
}
