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
 * flags bit 1: a group record: packets of one dump (same source, same
 * header but for packet_no), NRX_PACKET bytes each, in arrival order.
 * bit 2 (with bit 1): the group is the whole dump, packet_no 0 first, each
 * in its place, followed by one u64 nrx_hash() of each packet's data, then
 * u64 first segment, last segment, end offset in the packet log; len
 * counts all of it (NRX_PACKET + 8 bytes a packet, and 24).
 *
 * The copy filter keeps 64-bit hashes of (source, datagram) of exactly
 * packet-sized datagrams in two open-addressing tables; the current one is
 * retired to "previous" when half full or NRX_ROTATE_S seconds old, so a
 * copy is recognised for at least that long and memory stays fixed.
 *
 * Packet log: with a path prefix given, every packet held for grouping is
 * also appended (one writev() a batch) to the segment file <prefix><seq>,
 * as a record (struct lrec, then the packet), and a third thread,
 * "nrx-log", fdatasync()s what was written, again and again, so the
 * packets of a dump are durable about when its last one arrives, without
 * waiting for Python.  A whole group's record ends with the segments of
 * its first and last packets in the log and the end offset of the last
 * (0, 0, 0: not all of it is there); nrx_stats() says how far the log is
 * synced (segment by segment, in order).  A segment is
 * closed beyond NRX_LOG_SEGMENT bytes (synced, then closed, by the log
 * thread); Python deletes closed ones once what they hold is stored, and
 * replays the segments it finds at start.  A write or sync error ends the
 * log for good (log_error; groups then carry no position).
 *
 * Grouping: a packet whose header passes the same layout checks as
 * Python's fast path (version, offsets, arch, type, packet_no below a
 * packet_count of at most the configured maximum and NRX_GROUP_MAX) is held
 * with the other packets of its dump; a dump whose every packet arrived
 * goes to the ring as one record, so Python handles it in one step instead
 * of one per packet.  A group that has had no packet for NRX_HOLD_MS, a
 * group evicted because the groups hold NRX_GROUP_BYTES of the ring's size
 * or NRX_GROUPS dumps, and every group when the thread returns go to the
 * ring as they are (Python then feeds their packets one by one, exactly as
 * if they had not been held).  A packet that repeats a packet_no of its
 * group, or that does not pass the checks, goes to the ring on its own.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define NRX_BATCH	64
#define NRX_PACKET	1412		/* sizeof(struct netoops_msg) */
#define NRX_BUF		(NRX_PACKET + 1)
#define NRX_HDR		32
#define NRX_WRAP	0xffffffffu
#define NRX_ROTATE_S	30
#define NRX_SLOTS	(1u << 20)	/* per table: 8 MiB each */

#define NRX_VERSION	3
#define NRX_DATA_OFF	388		/* header + x86 block */
#define NRX_ARCH_OFF	216
#define NRX_ARCH_X86	2
#define NRX_GROUP_MAX	1024		/* packets: bigger dumps go one by one */
#define NRX_GROUPS	4096		/* dumps held at once */
#define NRX_GROUP_BYTES	4		/* groups hold at most 1/4 of the ring's size */
#define NRX_HOLD_MS	100
#define NRX_CLASSES	11		/* group buffers of 2^k packets, k < 11 */
#define NRX_FIRST_CLASS	3		/* doubled up to 8 packets at least */
#define NRX_BATCHES	32		/* read and not yet handled: 3.4 MB */
#define NRX_WAKE_EVERY	8		/* full batches waiting before a wake-up */
#define NRX_LOG_SEGMENT	(64u << 20)	/* packet log segments are closed beyond this */
#define NRX_LOG_MAGIC	0x31504c4eu	/* "NLP1" */
#define NRX_LOG_CLOSED	4		/* closed segments waiting for their last sync */
#define NRX_F_MARK	8		/* a ring record: segments below u64 may go */

struct batch;
#define NRX_F_CUT	1
#define NRX_F_GROUP	2
#define NRX_F_WHOLE	4

/* A packet log record's head (host byte order), followed by the packet. */
struct lrec {
	uint32_t magic;
	uint32_t len;		/* of the packet */
	uint16_t port;
	uint8_t family;
	uint8_t pad[5];
	uint64_t check;		/* the copy filter's hash of source and packet */
	double arrival;		/* CLOCK_REALTIME seconds */
	uint8_t addr[16];
};

#ifndef SO_MEMINFO
#define SO_MEMINFO	55
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
	uint64_t grouped;	/* dumps passed on whole, as one record */
	uint64_t group_flushes;	/* groups passed on before they were whole */
	uint64_t group_bytes;	/* bytes of group buffers now, spare ones included */
	uint64_t groups;	/* dumps held now */
	uint64_t last_read_ns;	/* CLOCK_REALTIME the last datagram was read, ns */
	uint64_t log_seq;	/* packet log segment being written (0: no log) */
	uint64_t log_synced_seq; /* the log is synced up to this segment ... */
	uint64_t log_synced_off; /* ... and offset in it */
	uint64_t log_synced_ns;	/* CLOCK_REALTIME of that sync, ns */
	uint64_t log_error;	/* errno that ended the log, 0 if none */
};

/* The packets of one dump held by the thread (see "Grouping" above). */
struct grp {
	struct grp *hnext;		/* hash chain */
	struct grp *older, *newer;	/* by last arrival */
	uint64_t key;
	uint8_t family, addr[16];
	uint16_t port;
	uint32_t count, have, cap;
	int cls;			/* @pkts holds 2^cls packets (-1: none) */
	double last;			/* CLOCK_MONOTONIC seconds of the last packet */
	uint64_t log_first;		/* the log segment of its first packet */
	uint64_t log_seq, log_end;	/* where its last packet ends in the log */
	int log_missing;		/* a packet of it is not in the log */
	double arrival;			/* CLOCK_REALTIME of the first */
	uint8_t *pkts;			/* @have packets in arrival order */
	uint8_t seen[];			/* one bit per packet_no */
};

struct nrx {
	int fd;
	int stop_pipe[2];
	int notify_pipe[2];
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stopping;		/* break out of every wait: records may be lost */
	int halt_req;		/* return (atomic; the stop pipe wakes a poll) */
	uint64_t queued, told;	/* records queued; as of the last notification */
	/* Batches between the reading and the handling thread (qlock). */
	pthread_t reader;
	pthread_mutex_t qlock;
	pthread_cond_t qfree, qfull;	/* a batch was freed; one was filled */
	struct batch *batches, *free[NRX_BATCHES], *full[NRX_BATCHES];
	size_t nfree, nfull;
	int read_done, read_error;
	uint8_t *ring;
	size_t cap, head, tail, used;	/* head: next write, tail: next read */
	struct nrx_stats st;		/* what nrx_stats() returns (lock held) */
	struct nrx_stats own;		/* the thread's counters, copied to @st per batch */
	uint32_t ovfl;
	uint64_t *cur, *prev;
	size_t cur_used;
	time_t rotated;
	uint32_t max_count;		/* packet_count accepted for grouping */
	size_t group_cap;		/* bytes groups may hold */
	size_t ngroups;
	struct grp *oldest, *newest;
	struct grp *buckets[NRX_GROUPS];
	/* Group buffers kept for reuse (first word: the next), counted in
	 * group_bytes: fresh ones cost page faults on every burst. */
	void *spare[NRX_CLASSES];
	size_t spare_bytes;
	/* The packet log: written by the handling thread, synced by the log
	 * thread.  @log_fd, @log_seq, @log_off are the handling thread's;
	 * the rest is under @llock. */
	char *log_path;			/* prefix, then room for the number */
	size_t log_prefix_len;
	int log_fd, log_dir;
	uint64_t log_seq, log_off;
	double log_opened;		/* CLOCK_MONOTONIC seconds of its first packet */
	double log_age;			/* a segment is closed when that is this old */
	pthread_t logger;
	int logger_started;
	pthread_mutex_t llock;
	pthread_cond_t lcond;
	int lw_fd, log_stop, log_failed;
	uint64_t lw_seq, lw_off;	/* written */
	/* Closed segments still to sync (and close), oldest first. */
	int old_fd[NRX_LOG_CLOSED];
	uint64_t old_seq[NRX_LOG_CLOSED], old_end[NRX_LOG_CLOSED];
	int nold;
	uint64_t ls_seq, ls_off;	/* synced */
	uint64_t dir_synced_seq;	/* the directory was synced after creating it */
};

static size_t rec_size(size_t len)
{
	return (NRX_HDR + len + 7) & ~(size_t)7;
}

/* Zeroed memory for the ring and the tables, in huge pages where the
 * kernel has them: a burst then costs few page faults. */
static void *big_alloc(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	madvise(p, n, MADV_HUGEPAGE);
	return p;
}

static void big_free(void *p, size_t n)
{
	if (p)
		munmap(p, n);
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

static uint64_t rotl(uint64_t v, int k)
{
	return v << k | v >> (64 - k);
}

/*
 * A 64-bit hash of @n bytes: four independent multiply lanes over 32-byte
 * steps (about four times the speed of one chain), then the tail.
 */
static uint64_t hash_bytes(const uint8_t *p, size_t n, uint64_t seed)
{
	const uint64_t m = 0x100000001b3ULL;
	uint64_t a = seed, b = seed ^ 0x9e3779b97f4a7c15ULL;
	uint64_t c = seed ^ 0xc2b2ae3d27d4eb4fULL, d = seed ^ 0x165667b19e3779f9ULL;
	uint64_t w[4];
	size_t i;

	for (i = 0; i + 32 <= n; i += 32) {
		memcpy(w, p + i, 32);
		a = (a ^ w[0]) * m + (a >> 29);
		b = (b ^ w[1]) * m + (b >> 29);
		c = (c ^ w[2]) * m + (c >> 29);
		d = (d ^ w[3]) * m + (d >> 29);
	}
	for (; i + 8 <= n; i += 8) {
		memcpy(w, p + i, 8);
		a = (a ^ w[0]) * m + (a >> 29);
	}
	for (; i < n; i++)
		b = (b ^ p[i]) * m + (b >> 29);
	return mix(a ^ rotl(b, 17) ^ rotl(c, 31) ^ rotl(d, 47) ^ n);
}

static uint64_t hash_packet(const uint8_t *addr, uint16_t port, const uint8_t *buf)
{
	uint64_t h = hash_bytes(buf, NRX_PACKET, hash_bytes(addr, 16, port));

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
	if (data)
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

/*
 * Copy the thread's counters to what nrx_stats() returns (lock held): with
 * every record queued, so a record taken is never ahead of the counts.
 */
static void sync_stats(struct nrx *r)
{
	r->st.packets = r->own.packets;
	r->st.duplicates = r->own.duplicates;
	r->st.kernel_drops = r->own.kernel_drops;
	r->st.ovfl = r->own.ovfl;
	r->st.grouped = r->own.grouped;
	r->st.group_flushes = r->own.group_flushes;
	r->st.group_bytes = r->own.group_bytes;
	r->st.groups = r->own.groups;
	r->st.last_read_ns = r->own.last_read_ns;
	r->st.ring_used = r->used;
}

/* Room for a record of @len: wait for it (lock held).  False if stopping. */
static int ring_wait(struct nrx *r, uint32_t len)
{
	while (!r->stopping && r->cap - r->used < room_needed(r, len)) {
		r->st.ring_waits++;
		pthread_cond_wait(&r->cond, &r->lock);
	}
	return !r->stopping;
}

/* The check of a packet log record (the copy filter's hash). */
uint64_t nrx_packet_hash(const uint8_t *addr, uint16_t port, const uint8_t *buf)
{
	return hash_packet(addr, port, buf);
}

/* The hash Python keeps of a complete dump's chunks (its data bytes). */
uint64_t nrx_hash(const uint8_t *data, size_t len)
{
	return hash_bytes(data, len, 0x51afd7ed558ccd1dULL) >> 1;	/* fits a signed 64-bit array */
}

static double monotonic(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return le16toh(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

/* The checks of Python's fast path; then the packet may be grouped. */
static int groupable(const struct nrx *r, const uint8_t *buf)
{
	uint32_t count = get32(buf + 12), no = get32(buf + 16);
	uint16_t type = get16(buf + 10);

	return get16(buf) == NRX_VERSION && get16(buf + 4) == NRX_DATA_OFF &&
	       get16(buf + 6) == NRX_ARCH_X86 && get16(buf + 8) == NRX_ARCH_OFF &&
	       (type == 1 || type == 3) && no < count && count <= r->max_count &&
	       count <= NRX_GROUP_MAX;
}

/* Everything of the header but packet_no, with the source. */
static uint64_t group_key(const uint8_t *addr, uint16_t port, const uint8_t *buf)
{
	uint64_t h = hash_bytes(addr, 16, port), w[3];

	/* version to packet_count, boot_id, the start of kernel_version: the
	 * rest of what must match is compared (same_group) */
	memcpy(w, buf, 16);
	memcpy(&w[2], buf + 20, 8);
	return mix(h ^ mix(w[0] ^ rotl(w[1], 21) ^ rotl(w[2], 42)));
}

static int same_group(const struct grp *g, uint8_t family, const uint8_t *addr,
		      uint16_t port, const uint8_t *buf)
{
	return g->family == family && g->port == port && !memcmp(g->addr, addr, 16) &&
	       !memcmp(g->pkts, buf, 16) &&
	       !memcmp(g->pkts + 20, buf + 20, NRX_DATA_OFF - 20);
}

static size_t class_bytes(int cls)
{
	return ((size_t)1 << cls) * NRX_PACKET;
}

static size_t group_size(const struct grp *g)
{
	return sizeof(*g) + (g->count + 7) / 8;
}

/*
 * The class of @g's next buffer: twice the last, or at once one for the
 * whole dump while the groups hold under half of what they may (doubling
 * copies every packet once more on the way; under pressure memory follows
 * what arrived).
 */
static int next_class(const struct nrx *r, const struct grp *g)
{
	int cls = 0;

	while (1u << cls < g->count)
		cls++;
	if (g->cls >= NRX_FIRST_CLASS &&
	    r->own.group_bytes + class_bytes(cls) <= r->group_cap / 2)
		return cls;
	return g->cls + 1;
}

/* A buffer of 2^@cls packets: a spare one, or a new one. */
static void *buf_get(struct nrx *r, int cls)
{
	void *p = r->spare[cls];

	if (p) {
		memcpy(&r->spare[cls], p, sizeof(void *));
		r->spare_bytes -= class_bytes(cls);
		return p;
	}
	p = malloc(class_bytes(cls));
	if (p)
		r->own.group_bytes += class_bytes(cls);
	return p;
}

/* Keep a buffer for reuse (it stays counted in group_bytes). */
static void buf_put(struct nrx *r, void *p, int cls)
{
	if (!p)
		return;
	memcpy(p, &r->spare[cls], sizeof(void *));
	r->spare[cls] = p;
	r->spare_bytes += class_bytes(cls);
}

/* Free spare buffers until @need more bytes fit under the cap (or none left). */
static void spare_trim(struct nrx *r, size_t need)
{
	int cls;

	for (cls = NRX_CLASSES - 1; cls >= 0; cls--) {
		while (r->spare[cls] && r->own.group_bytes + need > r->group_cap) {
			void *p = buf_get(r, cls);

			free(p);
			r->own.group_bytes -= class_bytes(cls);
		}
	}
}

static void group_unlink(struct nrx *r, struct grp *g)
{
	struct grp **pp = &r->buckets[g->key & (NRX_GROUPS - 1)];

	while (*pp != g)
		pp = &(*pp)->hnext;
	*pp = g->hnext;
	if (g->older)
		g->older->newer = g->newer;
	else
		r->oldest = g->newer;
	if (g->newer)
		g->newer->older = g->older;
	else
		r->newest = g->older;
	r->ngroups--;
	r->own.groups = r->ngroups;
	r->own.group_bytes -= group_size(g);
	if (g->cls >= 0)
		buf_put(r, g->pkts, g->cls);
	free(g);
}

/*
 * Pass a group on and free it: whole, in packet_no order with the hashes
 * of the data, or as it is.  False if stopping.
 */
static int group_emit(struct nrx *r, struct grp *g)
{
	int whole = g->have == g->count;
	uint32_t len = g->have * (NRX_PACKET + (whole ? 8 : 0)) + (whole ? 24 : 0);
	uint8_t *p;
	uint32_t i;

	pthread_mutex_lock(&r->lock);
	if (!ring_wait(r, len)) {
		pthread_mutex_unlock(&r->lock);
		return 0;
	}
	ring_put(r, len, g->port, g->family, NRX_F_GROUP | (whole ? NRX_F_WHOLE : 0),
		 g->addr, g->arrival, NULL);
	p = r->ring + (r->head ? r->head : r->cap) - rec_size(len) + NRX_HDR;
	for (i = 0; i < g->have; i++) {
		const uint8_t *pkt = g->pkts + (size_t)i * NRX_PACKET;
		uint32_t no = whole ? get32(pkt + 16) : i;
		uint64_t h;

		memcpy(p + (size_t)no * NRX_PACKET, pkt, NRX_PACKET);
		if (whole) {
			h = nrx_hash(pkt + NRX_DATA_OFF, NRX_PACKET - NRX_DATA_OFF);
			memcpy(p + (size_t)g->have * NRX_PACKET + (size_t)no * 8, &h, 8);
		}
	}
	if (whole) {
		uint64_t pos[3] = { g->log_first, g->log_seq, g->log_end };

		if (g->log_missing)
			pos[0] = pos[1] = pos[2] = 0;
		memcpy(p + (size_t)g->have * (NRX_PACKET + 8), pos, sizeof(pos));
		r->own.grouped++;
	} else {
		r->own.group_flushes++;
	}
	group_unlink(r, g);
	sync_stats(r);
	pthread_mutex_unlock(&r->lock);
	r->queued++;
	return 1;
}

/*
 * Hold a packet with its dump's others.  Returns 1 if it was taken, 0 if
 * it must go on its own, -1 if stopping.
 */
static int group_add(struct nrx *r, uint8_t family, const uint8_t *addr, uint16_t port,
		     double arrival, const uint8_t *buf, uint64_t log_end)
{
	uint64_t key = group_key(addr, port, buf);
	uint32_t no = get32(buf + 16), count = get32(buf + 12);
	struct grp *g;
	size_t grow;

	for (g = r->buckets[key & (NRX_GROUPS - 1)]; g; g = g->hnext)
		if (g->key == key && same_group(g, family, addr, port, buf))
			break;
	if (!g) {
		grow = sizeof(*g) + (count + 7) / 8 + NRX_PACKET;
		spare_trim(r, grow);
		/* An evicted group's buffer becomes a spare: freed as needed. */
		while (r->oldest && (r->ngroups >= NRX_GROUPS ||
				     r->own.group_bytes + grow > r->group_cap)) {
			if (!group_emit(r, r->oldest))
				return -1;
			spare_trim(r, grow);
		}
		if (r->own.group_bytes + grow > r->group_cap)
			return 0;
		g = calloc(1, sizeof(*g) + (count + 7) / 8);
		if (!g)
			return 0;
		g->cls = -1;
		g->key = key;
		g->family = family;
		memcpy(g->addr, addr, 16);
		g->port = port;
		g->count = count;
		g->arrival = arrival;
		g->hnext = r->buckets[key & (NRX_GROUPS - 1)];
		r->buckets[key & (NRX_GROUPS - 1)] = g;
		g->older = r->newest;
		if (r->newest)
			r->newest->newer = g;
		else
			r->oldest = g;
		r->newest = g;
		r->ngroups++;
		r->own.groups = r->ngroups;
		r->own.group_bytes += group_size(g);
	} else if (g->seen[no / 8] & (1u << (no % 8))) {
		return 0;	/* the same packet_no again, with other data */
	}
	if (g->have == g->cap) {
		int cls = next_class(r, g);
		uint8_t *more;

		grow = class_bytes(cls);
		if (!r->spare[cls] && r->own.group_bytes + grow > r->group_cap) {
			/* Make room from the others; alone over the cap, pass it on. */
			spare_trim(r, grow);
			while (!r->spare[cls] && r->own.group_bytes + grow > r->group_cap &&
			       (r->oldest != g || g->newer)) {
				if (!group_emit(r, r->oldest == g ? g->newer : r->oldest))
					return -1;
				if (!r->spare[cls])	/* else its buffer will do */
					spare_trim(r, grow);
			}
			if (!r->spare[cls] && r->own.group_bytes + grow > r->group_cap)
				return group_emit(r, g) ? 0 : -1;
		}
		more = buf_get(r, cls);
		if (!more)
			return group_emit(r, g) ? 0 : -1;
		if (g->have)
			memcpy(more, g->pkts, (size_t)g->have * NRX_PACKET);
		if (g->cls >= 0)
			buf_put(r, g->pkts, g->cls);
		g->pkts = more;
		g->cls = cls;
		g->cap = 1u << cls < g->count ? 1u << cls : g->count;
	}
	memcpy(g->pkts + (size_t)g->have * NRX_PACKET, buf, NRX_PACKET);
	g->have++;
	if (log_end) {
		if (!g->log_first)
			g->log_first = r->log_seq;
		g->log_seq = r->log_seq;
		g->log_end = log_end;
	} else {
		g->log_missing = 1;
	}
	g->seen[no / 8] |= 1u << (no % 8);
	g->last = monotonic();
	if (g != r->newest) {			/* most recently active last */
		if (g->older)
			g->older->newer = g->newer;
		else
			r->oldest = g->newer;
		g->newer->older = g->older;
		g->older = r->newest;
		g->newer = NULL;
		r->newest->newer = g;
		r->newest = g;
	}
	if (g->have == g->count && !group_emit(r, g))
		return -1;
	return 1;
}

/* Pass on the groups quiet for NRX_HOLD_MS, or all of them. */
static void groups_flush(struct nrx *r, int all)
{
	double cutoff = monotonic() - NRX_HOLD_MS / 1e3;

	while (r->oldest && (all || r->oldest->last <= cutoff))
		if (!group_emit(r, r->oldest))
			return;
}

static void groups_free(struct nrx *r)
{
	while (r->oldest)
		group_unlink(r, r->oldest);
	r->group_cap = 0;
	spare_trim(r, 1);
}

/* Queue one datagram.  False if stopping. */
static int emit_one(struct nrx *r, uint32_t len, uint16_t port, uint8_t family,
		    uint8_t flags, const uint8_t *addr, double arrival, const uint8_t *data)
{
	int ok;

	pthread_mutex_lock(&r->lock);
	ok = ring_wait(r, len);
	if (ok) {
		ring_put(r, len, port, family, flags, addr, arrival, data);
		sync_stats(r);
		r->queued++;
	}
	pthread_mutex_unlock(&r->lock);
	return ok;
}

/* Make the thread's counters visible to nrx_stats() and wake a waiting take. */
static void publish(struct nrx *r)
{
	pthread_mutex_lock(&r->lock);
	sync_stats(r);
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* What one recvmmsg() call read, passed from the reading thread on. */
struct batch {
	int n;				/* datagrams */
	int drops_known;		/* @drops was read */
	uint32_t drops;			/* the socket's drop count after the call */
	double arrival;			/* CLOCK_REALTIME after the call */
	/* Each datagram's source and copy-filter hash (0: not a packet),
	 * taken by the reading thread while its bytes are in its cache. */
	uint8_t family[NRX_BATCH], flags[NRX_BATCH], addr[NRX_BATCH][16];
	uint16_t port[NRX_BATCH];
	uint32_t len[NRX_BATCH];
	uint64_t h[NRX_BATCH];
	struct mmsghdr msgs[NRX_BATCH];
	struct iovec iovs[NRX_BATCH];
	struct sockaddr_storage addrs[NRX_BATCH];
	uint8_t bufs[NRX_BATCH][NRX_BUF];
};

/*
 * Each datagram's length, source and, for a packet-sized one, its hash for
 * the copy filter: here, where its bytes were just written, rather than
 * in the handling thread, which then touches only what it keeps.
 */
static void describe(const struct nrx *r, struct batch *b, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		b->len[i] = b->msgs[i].msg_len;
		b->flags[i] = b->msgs[i].msg_hdr.msg_flags & MSG_TRUNC ? NRX_F_CUT : 0;
		if (b->len[i] > NRX_BUF)
			b->len[i] = NRX_BUF;
		source_of(&b->addrs[i], &b->family[i], &b->port[i], b->addr[i]);
		b->h[i] = 0;
		if (b->len[i] == NRX_PACKET && !b->flags[i] && r->max_count)
			b->h[i] = hash_packet(b->addr[i], b->port[i], b->bufs[i]);
	}
}

/*
 * The reading thread: recvmmsg() into a free batch, describe() it, hand it
 * on, again.  It does nothing else, so the socket is drained at close to
 * the speed of the system call while the other thread handles the batches
 * before.
 */
static void *read_thread(void *arg)
{
	struct nrx *r = arg;
	struct pollfd pfd[2] = {
		{ .fd = r->fd, .events = POLLIN },
		{ .fd = r->stop_pipe[0], .events = POLLIN },
	};
	uint32_t meminfo[SK_MEMINFO_VARS];
	struct timespec ts;
	struct batch *b;
	int error = 0, i, n = 0, since = 0;
	socklen_t len;

	for (;;) {
		pthread_mutex_lock(&r->qlock);
		while (!r->nfree && !r->stopping) {	/* the other thread lags */
			pthread_cond_signal(&r->qfull);
			pthread_cond_wait(&r->qfree, &r->qlock);
		}
		b = r->nfree ? r->free[--r->nfree] : NULL;
		pthread_mutex_unlock(&r->qlock);
		if (!b || __atomic_load_n(&r->halt_req, __ATOMIC_ACQUIRE))
			break;
		/* After a full batch more is likely waiting: no poll first. */
		if (n < NRX_BATCH && poll(pfd, 2, -1) < 0 && errno != EINTR) {
			error = errno;
			pthread_mutex_lock(&r->qlock);
			r->free[r->nfree++] = b;
			pthread_mutex_unlock(&r->qlock);
			break;
		}
		if (__atomic_load_n(&r->halt_req, __ATOMIC_ACQUIRE)) {
			n = 0;
			b->drops_known = 0;
		} else {
			for (i = 0; i < NRX_BATCH; i++) {
				b->iovs[i].iov_base = b->bufs[i];
				b->iovs[i].iov_len = NRX_BUF;
				memset(&b->msgs[i].msg_hdr, 0, sizeof(b->msgs[i].msg_hdr));
				b->msgs[i].msg_hdr.msg_name = &b->addrs[i];
				b->msgs[i].msg_hdr.msg_namelen = sizeof(b->addrs[i]);
				b->msgs[i].msg_hdr.msg_iov = &b->iovs[i];
				b->msgs[i].msg_hdr.msg_iovlen = 1;
			}
			/* < 0: EAGAIN, EINTR, an ICMP error: poll again */
			n = recvmmsg(r->fd, b->msgs, NRX_BATCH, MSG_DONTWAIT, NULL);
			/*
			 * The kernel's drop count when the socket is drained and
			 * every NRX_WAKE_EVERY full batches: cheaper than
			 * SO_RXQ_OVFL's control message on every datagram, and
			 * than a system call for every batch of a burst.
			 */
			len = sizeof(meminfo);
			b->drops_known = (n > 0 ? n < NRX_BATCH || ++since >= NRX_WAKE_EVERY :
					  since > 0) &&
					 !getsockopt(r->fd, SOL_SOCKET, SO_MEMINFO, meminfo, &len) &&
					 len > SK_MEMINFO_DROPS * sizeof(uint32_t);
			if (b->drops_known)
				since = 0;
			b->drops = b->drops_known ? meminfo[SK_MEMINFO_DROPS] : 0;
			describe(r, b, n);
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		b->n = n > 0 ? n : 0;
		b->arrival = ts.tv_sec + ts.tv_nsec / 1e9;
		pthread_mutex_lock(&r->qlock);
		if (b->n || b->drops_known)	/* a drop count after a burst too */
			r->full[r->nfull++] = b;	/* never more than NRX_BATCHES */
		else
			r->free[r->nfree++] = b;
		/*
		 * Wake the handling thread when the socket is drained (a short
		 * batch: the next turn polls) or NRX_WAKE_EVERY batches are
		 * waiting, not for every batch: in a burst it handles a batch
		 * faster than this thread reads one, so it slept and was woken
		 * for each, and every wake-up preempted whichever thread had
		 * that CPU (often the one making dumps durable).
		 */
		if (b->n < NRX_BATCH || r->nfull >= NRX_WAKE_EVERY)
			pthread_cond_signal(&r->qfull);
		pthread_mutex_unlock(&r->qlock);
	}
	/* Tell the handling thread, in order: everything read is before this. */
	pthread_mutex_lock(&r->qlock);
	r->read_error = error;
	r->read_done = 1;
	pthread_cond_signal(&r->qfull);
	pthread_mutex_unlock(&r->qlock);
	return NULL;
}

/* Publish the log's state to nrx_stats() (llock held). */
static void log_publish(struct nrx *r, uint64_t synced_ns)
{
	pthread_mutex_lock(&r->lock);
	r->st.log_seq = r->lw_seq;
	r->st.log_synced_seq = r->ls_seq;
	r->st.log_synced_off = r->ls_off;
	if (synced_ns)
		r->st.log_synced_ns = synced_ns;
	r->st.log_error = r->log_failed;
	pthread_mutex_unlock(&r->lock);
}

/* End the log for good: groups from now on are not in it (llock held). */
static void log_fail(struct nrx *r, int err)
{
	if (!r->log_failed)
		r->log_failed = err ? err : EIO;
	log_publish(r, 0);
}

/* Open segment @seq of the log; -1 (errno set) on failure. */
static int log_open(struct nrx *r, uint64_t seq)
{
	snprintf(r->log_path + r->log_prefix_len, 24, "%08llu", (unsigned long long)seq);
	return open(r->log_path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
}

/*
 * Close the segment being written (the log thread syncs and closes it)
 * and open the next (llock held).  Returns 1 if it did.  It waits only
 * while NRX_LOG_CLOSED closed segments still wait for their last sync.
 */
static int log_rotate(struct nrx *r)
{
	int fd;

	while (r->nold == NRX_LOG_CLOSED && !r->log_failed)
		pthread_cond_wait(&r->lcond, &r->llock);
	fd = r->log_failed ? -1 : log_open(r, r->log_seq + 1);
	if (fd < 0) {
		log_fail(r, errno);
		r->log_fd = -1;
		return 0;
	}
	r->old_fd[r->nold] = r->lw_fd;
	r->old_seq[r->nold] = r->lw_seq;
	r->old_end[r->nold] = r->lw_off;
	r->nold++;
	r->log_fd = r->lw_fd = fd;
	r->log_seq = r->lw_seq = r->log_seq + 1;
	r->log_off = r->lw_off = 0;
	log_publish(r, 0);
	pthread_cond_signal(&r->lcond);
	return 1;
}

/*
 * After a rotation: tell Python, in order with the groups, which segments
 * it may delete once the dumps it took from them are stored: those below
 * the current one and below the first segment of every dump still held
 * here.  A whole dump queued before this record comes before it, so
 * Python has taken its hold on its segments by then.  False if stopping.
 */
static int log_mark(struct nrx *r)
{
	uint64_t below = r->log_seq;
	struct grp *g;

	for (g = r->oldest; g; g = g->newer)
		if (g->log_first && g->log_first < below)
			below = g->log_first;
	return emit_one(r, sizeof(below), 0, 0, NRX_F_MARK, (const uint8_t[16]){ 0 }, 0,
			(const uint8_t *)&below);
}

/*
 * A segment whose first packet is @log_age seconds old is closed too, when
 * the handling thread is idle: so Python can delete it once what it
 * holds is stored, and a restart does not replay what retention pruned.
 */
static int log_age(struct nrx *r)
{
	int rotated;

	if (r->log_fd < 0 || !r->log_off || monotonic() - r->log_opened < r->log_age)
		return 1;
	pthread_mutex_lock(&r->llock);
	rotated = log_rotate(r);
	pthread_mutex_unlock(&r->llock);
	return !rotated || log_mark(r);
}

/*
 * Append @n iovecs (@bytes in all) to the log, close the segment beyond
 * NRX_LOG_SEGMENT, wake the log thread.  On an error the log ends: the
 * groups whose packets were not written never see their position synced,
 * and Python journals them itself once nrx_stats() reports the error.
 * False if stopping.
 */
static int log_write(struct nrx *r, struct iovec *iov, int n, uint64_t bytes)
{
	uint64_t done = 0;
	ssize_t w;
	int err = 0, rotated = 0;

	while (done < bytes) {
		w = writev(r->log_fd, iov, n > 1024 ? 1024 : n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			err = w < 0 ? errno : ENOSPC;
			break;
		}
		done += w;
		while (n && (size_t)w >= iov->iov_len) {
			w -= iov->iov_len;
			iov++;
			n--;
		}
		if (n) {
			iov->iov_base = (uint8_t *)iov->iov_base + w;
			iov->iov_len -= w;
		}
	}
	if (!r->log_off)
		r->log_opened = monotonic();
	r->log_off += done;
	pthread_mutex_lock(&r->llock);
	r->lw_off = r->log_off;
	if (err || r->log_failed) {
		log_fail(r, err);
		r->log_fd = -1;		/* written no more; lw_fd is closed at stop */
		pthread_cond_signal(&r->lcond);
		pthread_mutex_unlock(&r->llock);
		return 1;
	}
	if (r->log_off >= NRX_LOG_SEGMENT)
		rotated = log_rotate(r);
	pthread_cond_signal(&r->lcond);
	pthread_mutex_unlock(&r->llock);
	return !rotated || log_mark(r);
}

/*
 * The log thread: fdatasync() what was written, a closed segment first
 * (then it closes it), and the directory once for each new segment; then
 * tell Python through the notification pipe.  Returns at stop once
 * everything written is synced, or at the first error.
 */
static void *log_thread(void *arg)
{
	struct nrx *r = arg;
	struct timespec ts;
	uint64_t seq, end;
	int fd, old, rc;

	pthread_mutex_lock(&r->llock);
	for (;;) {
		while (!r->log_stop && !r->log_failed && !r->nold &&
		       r->lw_seq == r->ls_seq && r->lw_off == r->ls_off)
			pthread_cond_wait(&r->lcond, &r->llock);
		if (r->log_failed)
			break;
		old = r->nold > 0;
		if (!old && r->lw_seq == r->ls_seq && r->lw_off == r->ls_off)
			break;		/* stopping, and all of it synced */
		fd = old ? r->old_fd[0] : r->lw_fd;
		seq = old ? r->old_seq[0] : r->lw_seq;
		end = old ? r->old_end[0] : r->lw_off;
		pthread_mutex_unlock(&r->llock);
		rc = fdatasync(fd);
		if (!rc && seq > r->dir_synced_seq) {
			rc = fsync(r->log_dir);		/* its name is durable too */
			if (!rc)
				r->dir_synced_seq = seq;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		pthread_mutex_lock(&r->llock);
		if (rc) {
			log_fail(r, errno);
			pthread_cond_broadcast(&r->lcond);
			break;
		}
		r->ls_seq = seq;
		r->ls_off = end;
		if (old) {
			close(fd);
			r->nold--;
			memmove(r->old_fd, r->old_fd + 1, r->nold * sizeof(*r->old_fd));
			memmove(r->old_seq, r->old_seq + 1, r->nold * sizeof(*r->old_seq));
			memmove(r->old_end, r->old_end + 1, r->nold * sizeof(*r->old_end));
			pthread_cond_broadcast(&r->lcond);
		}
		log_publish(r, (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec);
		pthread_mutex_unlock(&r->llock);
		if (write(r->notify_pipe[1], "", 1) < 0) {
			/* full: Python is woken already */
		}
		pthread_mutex_lock(&r->llock);
	}
	pthread_mutex_unlock(&r->llock);
	if (write(r->notify_pipe[1], "", 1) < 0)
		return NULL;
	return NULL;
}

/* Handle one batch: count, drop copies, group, log, queue. False if stopping. */
static int handle(struct nrx *r, struct batch *b)
{
	const uint8_t *family = b->family, *flags = b->flags;
	const uint16_t *port = b->port;
	const uint32_t *len = b->len;
	const uint64_t *h = b->h;
	uint8_t (*addr)[16] = b->addr;
	struct lrec heads[NRX_BATCH];
	struct iovec iov[2 * NRX_BATCH];
	uint64_t logged = 0, end;
	int i, got, n = 0, ok = 1;

	if (b->drops_known) {
		r->own.kernel_drops += (uint32_t)(b->drops - r->ovfl);
		r->ovfl = b->drops;
		r->own.ovfl = b->drops;
	}
	if (b->n)
		r->own.last_read_ns = (uint64_t)(b->arrival * 1e9);
	/*
	 * First every packet's slots in the copy tables fetched: the tables
	 * are far bigger than the caches, and misses waited for one at a
	 * time were half of this thread's time.
	 */
	for (i = 0; i < b->n; i++) {
		if (h[i]) {
			__builtin_prefetch(&r->cur[h[i] & (NRX_SLOTS - 1)]);
			__builtin_prefetch(&r->prev[h[i] & (NRX_SLOTS - 1)]);
		}
	}
	for (i = 0; i < b->n; i++) {
		r->own.packets++;
		got = 0;
		if (h[i]) {
			if (is_copy(r, h[i])) {
				r->own.duplicates++;
				continue;
			}
			if (groupable(r, b->bufs[i])) {
				end = r->log_fd >= 0 ?
				      r->log_off + logged + sizeof(struct lrec) + NRX_PACKET : 0;
				got = group_add(r, family[i], addr[i], port[i], b->arrival,
						b->bufs[i], end);
				if (got > 0 && end) {
					struct lrec *l = &heads[n / 2];

					memset(l, 0, sizeof(*l));
					l->magic = NRX_LOG_MAGIC;
					l->len = NRX_PACKET;
					l->port = port[i];
					l->family = family[i];
					l->check = h[i];
					l->arrival = b->arrival;
					memcpy(l->addr, addr[i], 16);
					iov[n++] = (struct iovec){ l, sizeof(*l) };
					iov[n++] = (struct iovec){ b->bufs[i], NRX_PACKET };
					logged += sizeof(*l) + NRX_PACKET;
				}
			}
		}
		if (got < 0 || (!got && !emit_one(r, len[i], port[i], family[i], flags[i],
						  addr[i], b->arrival, b->bufs[i]))) {
			ok = 0;
			break;
		}
	}
	if (n && !log_write(r, iov, n, logged))	/* what the groups were told */
		ok = 0;
	return ok;
}

/*
 * The handling thread: takes the reading thread's batches in order,
 * passes groups on that have been quiet for NRX_HOLD_MS, and wakes Python
 * when records were queued.
 */
static void *rx_thread(void *arg)
{
	struct nrx *r = arg;
	struct batch *b;
	int halted = 0, ok = 1, more;

	while (ok) {
		pthread_mutex_lock(&r->qlock);
		/* oldest first: the list is a stack, so take from its bottom */
		b = NULL;
		while (!r->nfull && !r->read_done && !r->stopping) {
			struct timespec until;

			if (!r->ngroups && (r->log_fd < 0 || !r->log_off)) {
				pthread_cond_wait(&r->qfull, &r->qlock);
				continue;
			}
			clock_gettime(CLOCK_MONOTONIC, &until);
			until.tv_nsec += NRX_HOLD_MS / 2 * 1000000L;
			until.tv_sec += until.tv_nsec / 1000000000;
			until.tv_nsec %= 1000000000;
			if (pthread_cond_timedwait(&r->qfull, &r->qlock, &until))
				break;
		}
		if (r->nfull) {
			b = r->full[0];
			memmove(r->full, r->full + 1, --r->nfull * sizeof(*r->full));
		} else if (r->read_done || r->stopping) {
			halted = r->read_done;	/* and not stopping: pass on what was read */
			pthread_mutex_unlock(&r->qlock);
			break;
		}
		more = r->nfull > 0;
		pthread_mutex_unlock(&r->qlock);
		if (b) {
			ok = handle(r, b);
			pthread_mutex_lock(&r->qlock);
			r->free[r->nfree++] = b;
			pthread_cond_signal(&r->qfree);
			pthread_mutex_unlock(&r->qlock);
		}
		if (!more) {
			groups_flush(r, 0);
			publish(r);
			if (!log_age(r))
				break;
		}
		/*
		 * Wake Python's selector if records were queued (copies only
		 * change counters, which Python reads when it logs them); a full
		 * pipe already says "ready".
		 */
		if (r->queued != r->told) {
			r->told = r->queued;
			if (write(r->notify_pipe[1], "", 1) < 0)
				continue;
		}
	}
	if (halted)		/* what was read is passed on */
		groups_flush(r, 1);
	publish(r);
	pthread_mutex_lock(&r->lock);
	r->st.error = r->read_error;
	r->st.exited = 1;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	/* Wake Python: it learns from nrx_stats() that the threads are gone. */
	if (write(r->notify_pipe[1], "", 1) < 0)
		return NULL;
	return NULL;
}

void nrx_stop(struct nrx *r);

/* Sync what was written, end the log thread, close the log's files. */
static void log_stop(struct nrx *r)
{
	pthread_mutex_lock(&r->llock);
	r->log_stop = 1;
	pthread_cond_broadcast(&r->lcond);
	pthread_mutex_unlock(&r->llock);
	if (r->logger_started)
		pthread_join(r->logger, NULL);
	r->logger_started = 0;
	while (r->nold)
		close(r->old_fd[--r->nold]);
	if (r->lw_fd >= 0)
		close(r->lw_fd);
	if (r->log_dir >= 0)
		close(r->log_dir);
	r->lw_fd = r->log_fd = r->log_dir = -1;
	free(r->log_path);
	r->log_path = NULL;
}

/*
 * The packet log's first segment, <@prefix><@seq> (a new file), and its
 * thread.  On failure the receiver runs without a log (log_error says why).
 */
static void log_start(struct nrx *r, const char *prefix, uint64_t seq)
{
	const char *slash = strrchr(prefix, '/');
	char *dir;

	r->log_prefix_len = strlen(prefix);
	r->log_path = malloc(r->log_prefix_len + 24);
	dir = slash ? strndup(prefix, slash == prefix ? 1 : (size_t)(slash - prefix)) :
		      strdup(".");
	if (!r->log_path || !dir) {
		free(dir);
		r->log_failed = ENOMEM;
		return;
	}
	memcpy(r->log_path, prefix, r->log_prefix_len + 1);
	r->log_dir = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	r->log_fd = r->log_dir < 0 ? -1 : log_open(r, seq);
	if (r->log_fd < 0) {
		r->log_failed = errno ? errno : EIO;
		return;
	}
	r->lw_fd = r->log_fd;
	r->log_seq = r->lw_seq = r->ls_seq = seq;
	r->dir_synced_seq = seq - 1;
	errno = pthread_create(&r->logger, NULL, log_thread, r);
	if (errno) {
		r->log_failed = errno;
		close(r->log_fd);
		unlink(r->log_path);
		r->log_fd = r->lw_fd = -1;
		return;
	}
	r->logger_started = 1;
	pthread_setname_np(r->logger, "nrx-log");
}

/*
 * Start a receive thread on @fd (a bound UDP socket) with a ring of
 * @ring_bytes; dumps of up to @max_count packets are grouped, and with
 * @log_prefix (a path prefix; NULL: none) their packets go to the packet
 * log from segment @log_seq (> 0) on, each closed beyond NRX_LOG_SEGMENT
 * bytes or @log_age seconds after its first packet.  With @max_count 0 the socket is
 * not netoops': every datagram is passed on as it is (no copy dropped,
 * none grouped, no log), as netconsole needs.  Returns NULL (errno set)
 * on failure.
 */
struct nrx *nrx_start(int fd, size_t ring_bytes, uint32_t max_count, const char *log_prefix,
		      uint64_t log_seq, double log_age)
{
	struct nrx *r = calloc(1, sizeof(*r));
	pthread_condattr_t attr;

	if (!r)
		return NULL;
	r->fd = fd;
	r->stop_pipe[0] = r->stop_pipe[1] = r->notify_pipe[0] = r->notify_pipe[1] = -1;
	r->log_fd = r->lw_fd = r->log_dir = -1;
	errno = 0;
	r->cap = ring_bytes & ~(size_t)7;
	r->ring = big_alloc(r->cap);
	r->cur = big_alloc(NRX_SLOTS * sizeof(uint64_t));
	r->prev = big_alloc(NRX_SLOTS * sizeof(uint64_t));
	r->rotated = time(NULL);
	r->max_count = max_count;
	r->group_cap = r->cap / NRX_GROUP_BYTES;
	r->batches = big_alloc(NRX_BATCHES * sizeof(*r->batches));
	if (!r->ring || !r->cur || !r->prev || !r->batches || r->cap < 2 * rec_size(NRX_BUF) ||
	    pipe2(r->stop_pipe, O_CLOEXEC) ||
	    pipe2(r->notify_pipe, O_CLOEXEC | O_NONBLOCK)) {
		if (!errno)
			errno = EINVAL;
		goto fail;
	}
	for (r->nfree = 0; r->nfree < NRX_BATCHES; r->nfree++)
		r->free[r->nfree] = &r->batches[r->nfree];
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	pthread_mutex_init(&r->qlock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&r->qfull, &attr);
	pthread_cond_init(&r->qfree, &attr);
	pthread_condattr_destroy(&attr);
	pthread_mutex_init(&r->llock, NULL);
	pthread_cond_init(&r->lcond, NULL);
	if (log_prefix && max_count && log_seq) {
		r->log_age = log_age;
		log_start(r, log_prefix, log_seq);
		r->st.log_seq = r->log_fd >= 0 ? log_seq : 0;
		r->st.log_synced_seq = r->log_fd >= 0 ? log_seq : 0;
		r->st.log_error = r->log_failed;
	}
	errno = pthread_create(&r->thread, NULL, rx_thread, r);
	if (!errno) {
		/* names for top -H and perf: "nrx-read", "nrx-handle" */
		pthread_setname_np(r->thread, "nrx-handle");
		errno = pthread_create(&r->reader, NULL, read_thread, r);
		if (!errno)
			pthread_setname_np(r->reader, "nrx-read");
		if (errno) {		/* the handling thread sees a reader that ended */
			pthread_mutex_lock(&r->qlock);
			r->read_done = 1;
			pthread_cond_signal(&r->qfull);
			pthread_mutex_unlock(&r->qlock);
			pthread_join(r->thread, NULL);
		}
	}
	if (errno) {
		int err = errno;

		log_stop(r);
		pthread_mutex_destroy(&r->lock);
		pthread_cond_destroy(&r->cond);
		pthread_mutex_destroy(&r->qlock);
		pthread_cond_destroy(&r->qfull);
		pthread_cond_destroy(&r->qfree);
		pthread_mutex_destroy(&r->llock);
		pthread_cond_destroy(&r->lcond);
		errno = err;
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
	big_free(r->ring, r->cap);
	big_free(r->cur, NRX_SLOTS * sizeof(uint64_t));
	big_free(r->prev, NRX_SLOTS * sizeof(uint64_t));
	big_free(r->batches, NRX_BATCHES * sizeof(*r->batches));
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
	__atomic_store_n(&r->halt_req, 1, __ATOMIC_RELEASE);
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
	pthread_mutex_lock(&r->qlock);
	r->stopping = 1;
	pthread_cond_broadcast(&r->qfree);
	pthread_cond_broadcast(&r->qfull);
	pthread_mutex_unlock(&r->qlock);
	__atomic_store_n(&r->halt_req, 1, __ATOMIC_RELEASE);
	if (write(r->stop_pipe[1], "", 1) < 0)
		return;		/* cannot happen with an empty pipe; leak rather than hang */
	pthread_join(r->reader, NULL);
	pthread_join(r->thread, NULL);
	log_stop(r);
	pthread_mutex_destroy(&r->llock);
	pthread_cond_destroy(&r->lcond);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->qlock);
	pthread_cond_destroy(&r->qfull);
	pthread_cond_destroy(&r->qfree);
	groups_free(r);
	for (int i = 0; i < 2; i++) {
		close(r->stop_pipe[i]);
		close(r->notify_pipe[i]);
	}
	big_free(r->ring, r->cap);
	big_free(r->cur, NRX_SLOTS * sizeof(uint64_t));
	big_free(r->prev, NRX_SLOTS * sizeof(uint64_t));
	big_free(r->batches, NRX_BATCHES * sizeof(*r->batches));
	free(r);
}
