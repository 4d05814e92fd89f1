// SPDX-License-Identifier: GPL-2.0
/*
 * netoops collector: the receive thread.
 *
 * One thread per socket reads datagrams in batches with recvmmsg(), drops
 * exact copies of a netoops packet it has already passed on (the kernel
 * sends every dump three times) and hands everything else, with its source
 * address, to Python through a ring buffer.  Python (reassembly, analysis,
 * storage) may lag behind; the socket is still drained at the speed of
 * this loop, so a burst lands in the ring rather than overflowing the
 * kernel's receive buffer.  When the ring is full the thread waits (the
 * kernel buffer then takes the overflow, and its drops are counted).
 *
 * Python loads this file as a plain shared object through ctypes (no
 * Python API); the functions are nrx_start, nrx_notify_fd, nrx_take,
 * nrx_stats, nrx_halt and nrx_stop.  To stop without losing a datagram the
 * thread has read: nrx_halt(), nrx_take() until nrx_stats() says the thread
 * exited and the ring is empty, then nrx_stop().
 *
 * Records in the ring (and in what nrx_take copies out), 8-byte aligned:
 *	u32 len, u16 port (host order), u8 family, u8 flags, u8 addr[16],
 *	f64 arrival (CLOCK_REALTIME seconds), then len bytes of datagram.
 * flags bit 0: the datagram was longer than NRX_BUF (MSG_TRUNC).
 *
 * The copy filter keeps 64-bit hashes of (source, datagram) of exactly
 * packet-sized datagrams in two open-addressing tables; the current one is
 * retired to "previous" when half full or NRX_ROTATE_S seconds old, so a
 * copy is recognised for at least that long and memory stays fixed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NRX_BATCH	64
#define NRX_PACKET	1412		/* sizeof(struct netoops_msg) */
#define NRX_BUF		(NRX_PACKET + 1)
#define NRX_HDR		32
#define NRX_WRAP	0xffffffffu
#define NRX_ROTATE_S	30
#define NRX_SLOTS	(1u << 20)	/* per table: 8 MiB each */

#ifndef SO_RXQ_OVFL
#define SO_RXQ_OVFL	40
#endif

struct nrx_stats {
	uint64_t packets;	/* datagrams read */
	uint64_t duplicates;	/* exact copies dropped here */
	uint64_t kernel_drops;	/* dropped by the kernel: receive buffer full */
	uint64_t ring_waits;	/* times the thread waited for room in the ring */
	uint64_t ring_used_max;	/* most bytes the ring held */
	uint64_t ring_used;	/* bytes it holds now */
	uint64_t ovfl;		/* the kernel's drop count, as last reported */
	uint64_t error;		/* errno that ended the thread, 0 if none */
	uint64_t exited;	/* the thread has returned */
};

struct nrx {
	int fd;
	int stop_pipe[2];
	int notify_pipe[2];
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stopping;		/* break out of every wait: records may be lost */
	uint8_t *ring;
	size_t cap, head, tail, used;	/* head: next write, tail: next read */
	struct nrx_stats st;
	uint32_t ovfl;
	uint64_t *cur, *prev;
	size_t cur_used;
	time_t rotated;
};

static size_t rec_size(size_t len)
{
	return (NRX_HDR + len + 7) & ~(size_t)7;
}

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

static uint64_t hash_packet(const uint8_t *addr, uint16_t port, const uint8_t *buf)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ port, w;
	size_t i;

	for (i = 0; i < 16; i += 8) {
		memcpy(&w, addr + i, 8);
		h = mix(h ^ w) + i;
	}
	for (i = 0; i + 8 <= NRX_PACKET; i += 8) {
		memcpy(&w, buf + i, 8);
		h = (h ^ w) * 0x100000001b3ULL + (h >> 29);
	}
	memcpy(&w, buf + NRX_PACKET - 8, 8);
	h = mix(h ^ w);
	return h ? h : 1;
}

static int seen_in(const uint64_t *table, uint64_t h)
{
	size_t i = h & (NRX_SLOTS - 1);

	while (table[i]) {
		if (table[i] == h)
			return 1;
		i = (i + 1) & (NRX_SLOTS - 1);
	}
	return 0;
}

/* True if the datagram is a copy of one passed on; else remember it. */
static int is_copy(struct nrx *r, uint64_t h)
{
	time_t now = time(NULL);
	uint64_t *t;
	size_t i;

	if (seen_in(r->cur, h) || seen_in(r->prev, h))
		return 1;
	if (r->cur_used >= NRX_SLOTS / 2 || now - r->rotated >= NRX_ROTATE_S) {
		t = r->prev;
		memset(t, 0, NRX_SLOTS * sizeof(*t));
		r->prev = r->cur;
		r->cur = t;
		r->cur_used = 0;
		r->rotated = now;
	}
	i = h & (NRX_SLOTS - 1);
	while (r->cur[i])
		i = (i + 1) & (NRX_SLOTS - 1);
	r->cur[i] = h;
	r->cur_used++;
	return 0;
}

static void source_of(const struct sockaddr_storage *ss, uint8_t *family,
		      uint16_t *port, uint8_t *addr)
{
	memset(addr, 0, 16);
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)ss;

		*family = 6;
		*port = ntohs(s6->sin6_port);
		memcpy(addr, &s6->sin6_addr, 16);
	} else {
		const struct sockaddr_in *s4 = (const void *)ss;

		*family = 4;
		*port = ntohs(s4->sin_port);
		memcpy(addr, &s4->sin_addr, 4);
	}
}

/* Append one record; the caller holds the lock and made room. */
static void ring_put(struct nrx *r, uint32_t len, uint16_t port, uint8_t family,
		     uint8_t flags, const uint8_t *addr, double arrival, const uint8_t *data)
{
	size_t need = rec_size(len);
	uint8_t *p;

	if (r->cap - r->head < need) {		/* no room at the end: wrap */
		if (r->cap - r->head >= 4)
			memcpy(r->ring + r->head, &(uint32_t){ NRX_WRAP }, 4);
		r->used += r->cap - r->head;
		r->head = 0;
	}
	p = r->ring + r->head;
	memcpy(p, &len, 4);
	memcpy(p + 4, &port, 2);
	p[6] = family;
	p[7] = flags;
	memcpy(p + 8, addr, 16);
	memcpy(p + 24, &arrival, 8);
	memcpy(p + NRX_HDR, data, len);
	r->head += need;
	if (r->head == r->cap)
		r->head = 0;
	r->used += need;
	if (r->used > r->st.ring_used_max)
		r->st.ring_used_max = r->used;
}

/* Bytes a record of @len would take now, counting the wasted tail on a wrap. */
static size_t room_needed(const struct nrx *r, uint32_t len)
{
	size_t need = rec_size(len);

	return r->cap - r->head < need ? need + (r->cap - r->head) : need;
}

static void *rx_thread(void *arg)
{
	struct nrx *r = arg;
	uint8_t (*bufs)[NRX_BUF];
	struct sockaddr_storage *addrs;
	struct mmsghdr msgs[NRX_BATCH];
	struct iovec iovs[NRX_BATCH];
	char ctrl[NRX_BATCH][CMSG_SPACE(sizeof(uint32_t))];
	struct timespec ts;
	double arrival;
	int error = 0;
	struct pollfd pfd[2] = {
		{ .fd = r->fd, .events = POLLIN },
		{ .fd = r->stop_pipe[0], .events = POLLIN },
	};
	int i, n;

	bufs = malloc(sizeof(*bufs) * NRX_BATCH);
	addrs = malloc(sizeof(*addrs) * NRX_BATCH);
	if (!bufs || !addrs) {
		error = ENOMEM;
		goto out;
	}
	for (;;) {
		if (poll(pfd, 2, -1) < 0 && errno != EINTR) {
			error = errno;
			break;
		}
		if (pfd[1].revents)
			break;
		for (i = 0; i < NRX_BATCH; i++) {
			iovs[i].iov_base = bufs[i];
			iovs[i].iov_len = NRX_BUF;
			memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
			msgs[i].msg_hdr.msg_name = &addrs[i];
			msgs[i].msg_hdr.msg_namelen = sizeof(addrs[i]);
			msgs[i].msg_hdr.msg_iov = &iovs[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
			msgs[i].msg_hdr.msg_control = ctrl[i];
			msgs[i].msg_hdr.msg_controllen = sizeof(ctrl[i]);
		}
		n = recvmmsg(r->fd, msgs, NRX_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			continue;	/* EAGAIN, EINTR, an ICMP error: poll again */
		clock_gettime(CLOCK_REALTIME, &ts);
		arrival = ts.tv_sec + ts.tv_nsec / 1e9;
		pthread_mutex_lock(&r->lock);
		for (i = 0; i < n; i++) {
			struct msghdr *mh = &msgs[i].msg_hdr;
			struct cmsghdr *c;
			uint32_t len = msgs[i].msg_len;
			uint8_t family, flags = 0, addr[16];
			uint16_t port;

			for (c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
				uint32_t v;

				if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SO_RXQ_OVFL)
					continue;
				memcpy(&v, CMSG_DATA(c), sizeof(v));
				r->st.kernel_drops += (uint32_t)(v - r->ovfl);
				r->ovfl = v;
				r->st.ovfl = v;
			}
			if (mh->msg_flags & MSG_TRUNC)
				flags |= 1;
			if (len > NRX_BUF)
				len = NRX_BUF;
			source_of(&addrs[i], &family, &port, addr);
			r->st.packets++;
			if (len == NRX_PACKET && !flags &&
			    is_copy(r, hash_packet(addr, port, bufs[i]))) {
				r->st.duplicates++;
				continue;
			}
			while (!r->stopping && r->cap - r->used < room_needed(r, len)) {
				r->st.ring_waits++;
				pthread_cond_wait(&r->cond, &r->lock);
			}
			if (r->stopping)
				break;
			ring_put(r, len, port, family, flags, addr, arrival, bufs[i]);
		}
		r->st.ring_used = r->used;
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
		/* Wake Python's selector; a full pipe already says "ready". */
		if (write(r->notify_pipe[1], "", 1) < 0)
			continue;
	}
out:
	free(bufs);
	free(addrs);
	pthread_mutex_lock(&r->lock);
	r->st.error = error;
	r->st.exited = 1;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	/* Wake Python: it learns from nrx_stats() that the thread is gone. */
	if (write(r->notify_pipe[1], "", 1) < 0)
		return NULL;
	return NULL;
}

void nrx_stop(struct nrx *r);

/*
 * Start a receive thread on @fd (a bound UDP socket) with a ring of
 * @ring_bytes.  Returns NULL (errno set) on failure.
 */
struct nrx *nrx_start(int fd, size_t ring_bytes)
{
	static const int one = 1;
	struct nrx *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->fd = fd;
	r->stop_pipe[0] = r->stop_pipe[1] = r->notify_pipe[0] = r->notify_pipe[1] = -1;
	errno = 0;
	r->cap = ring_bytes & ~(size_t)7;
	r->ring = malloc(r->cap);
	r->cur = calloc(NRX_SLOTS, sizeof(uint64_t));
	r->prev = calloc(NRX_SLOTS, sizeof(uint64_t));
	r->rotated = time(NULL);
	if (!r->ring || !r->cur || !r->prev || r->cap < 2 * rec_size(NRX_BUF) ||
	    pipe2(r->stop_pipe, O_CLOEXEC) ||
	    pipe2(r->notify_pipe, O_CLOEXEC | O_NONBLOCK)) {
		if (!errno)
			errno = EINVAL;
		goto fail;
	}
	setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one));
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	errno = pthread_create(&r->thread, NULL, rx_thread, r);
	if (errno) {
		pthread_mutex_destroy(&r->lock);
		pthread_cond_destroy(&r->cond);
		goto fail;
	}
	return r;
fail:
	for (int i = 0; i < 2; i++) {
		if (r->stop_pipe[i] >= 0)
			close(r->stop_pipe[i]);
		if (r->notify_pipe[i] >= 0)
			close(r->notify_pipe[i]);
	}
	free(r->ring);
	free(r->cur);
	free(r->prev);
	free(r);
	return NULL;
}

/* A descriptor that becomes readable when records are waiting (drain it). */
int nrx_notify_fd(struct nrx *r)
{
	return r->notify_pipe[0];
}

/*
 * Copy whole records into @out (at most @cap bytes), waiting up to
 * @timeout_ms for the first one.  Returns the bytes copied.
 */
size_t nrx_take(struct nrx *r, uint8_t *out, size_t cap, int timeout_ms)
{
	struct timespec until;
	size_t got = 0, left, tail, used, consumed = 0, n = 0, i;
	struct { size_t from, size; } seg[2];

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&r->lock);
	while (!r->used && timeout_ms > 0 &&
	       pthread_cond_timedwait(&r->cond, &r->lock, &until) == 0)
		;
	/*
	 * Plan under the lock (at most two runs of records: before and after
	 * the wrap), copy without it: the thread never writes into bytes that
	 * still count as used, so it keeps receiving while this copies.
	 */
	tail = r->tail;
	used = r->used;
	while (used) {
		uint32_t len;
		size_t size, skip;

		if (r->cap - tail < 4) {
			skip = r->cap - tail;
		} else {
			memcpy(&len, r->ring + tail, 4);
			skip = len == NRX_WRAP ? r->cap - tail : 0;
		}
		if (skip) {
			used -= skip;
			consumed += skip;
			tail = 0;
			continue;
		}
		size = rec_size(len);
		if (got + size > cap)
			break;
		if (n && seg[n - 1].from + seg[n - 1].size == tail)
			seg[n - 1].size += size;
		else
			seg[n++] = (typeof(seg[0])){ tail, size };
		got += size;
		used -= size;
		consumed += size;
		tail += size;
		if (tail == r->cap)
			tail = 0;
	}
	pthread_mutex_unlock(&r->lock);
	for (i = 0, got = 0; i < n; i++) {
		memcpy(out + got, r->ring + seg[i].from, seg[i].size);
		got += seg[i].size;
	}
	pthread_mutex_lock(&r->lock);
	r->tail = tail;
	r->used -= consumed;
	if (!r->used)
		r->head = r->tail = 0;
	r->st.ring_used = r->used;
	left = r->used;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	/* Records left (@out was full): say so, or a selector waits for the next datagram. */
	if (left && write(r->notify_pipe[1], "", 1) < 0)
		return got;
	return got;
}

/* Ask the thread to return once the batch in hand is in the ring (it may
 * wait for room: keep taking until nrx_stats() says it exited). */
void nrx_halt(struct nrx *r)
{
	if (write(r->stop_pipe[1], "", 1) < 0)
		return;
}

void nrx_stats(struct nrx *r, struct nrx_stats *out)
{
	pthread_mutex_lock(&r->lock);
	*out = r->st;
	pthread_mutex_unlock(&r->lock);
}

/* Stop the thread and free everything; the socket stays open. */
void nrx_stop(struct nrx *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stopping = 1;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	if (write(r->stop_pipe[1], "", 1) < 0)
		return;		/* cannot happen with an empty pipe; leak rather than hang */
	pthread_join(r->thread, NULL);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	for (int i = 0; i < 2; i++) {
		close(r->stop_pipe[i]);
		close(r->notify_pipe[i]);
	}
	free(r->ring);
	free(r->cur);
	free(r->prev);
	free(r);
}
