// SPDX-License-Identifier: GPL-2.0
/*
 * netoops: send the whole kernel log, the registers of the fault and a few
 * machine facts over UDP when the kernel oopses or panics, or when a soft
 * dump is asked for (sysrq 'y').
 *
 * Targets are netpoll targets (configfs /sys/kernel/config/netoops/ or the
 * netoops= parameter).  The packet format is in netoops_wire.h.
 *
 * The panic dump allocates nothing: its buffers and skbs are allocated at
 * load time, and when the device has not let go of them yet (most NICs free
 * sent skbs only from NAPI, which never runs again after a panic) it polls
 * the device for completions as netpoll does; it never falls back to the
 * allocator.  Oops and soft dumps send through netpoll_send_udp(), which
 * takes one skb per packet (GFP_ATOMIC, falling back on netpoll's pool of
 * 32).  No dump takes a sleeping lock; they run with interrupts off while
 * they transmit and wait only for bounded times (the README lists each).
 * A panic always gets its dump out: it has a message buffer of its own, so
 * a live dump that another CPU was sending when the panic stopped it does
 * not hold it up, and a send that faults inside the panic dump marks its
 * target and the dump starts over for the targets that are left.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/delay.h>
#include <linux/etherdevice.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/irq.h>
#include <linux/kdebug.h>
#include <linux/kmsg_dump.h>
#include <linux/kobject.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/netpoll.h>
#include <linux/nmi.h>
#include <linux/notifier.h>
#include <linux/panic_notifier.h>
#include <linux/percpu.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/seqlock.h>
#include <linux/skbuff.h>
#include <linux/string.h>
#include <linux/sysrq.h>
#include <linux/sysfs.h>
#include <linux/udp.h>
#include <linux/utsname.h>
#include <linux/vmalloc.h>
#include <net/checksum.h>
#include <net/ip6_checksum.h>
#include <asm/processor.h>
#include <asm/unaligned.h>

#include "netoops_version.h"
#include "netpoll_targets.h"
#include "netoops_wire.h"

/*
 * netoops builds from one source against a kernel with the core hooks
 * (core-hooks/series: kmsg_dump_detail, KMSG_DUMP_SOFT, sysrq y,
 * panic_on_other_cpu()) and against a stock 6.1 kernel, where it takes the
 * registers of an oops from the die notifier and registers sysrq y itself.
 */
#ifdef KMSG_DUMP_HAVE_DETAIL
#define NETOOPS_MODE	"patched"
#else
#define NETOOPS_MODE	"stock"
#endif

/*
 * A live dump returns before its next packet when another CPU panics, so
 * that the panic stops this CPU with an interrupt rather than an NMI in the
 * middle of netpoll.  A stock kernel exports no panic_cpu: there, a CPU
 * that oopses or panics raises oops_in_progress, and the live dump makes
 * way for either.
 */
#ifdef KMSG_DUMP_HAVE_DETAIL
static bool netoops_make_way(void)
{
	return panic_on_other_cpu();
}
#else
static bool netoops_make_way(void)
{
	return READ_ONCE(oops_in_progress);
}
#endif

/* What a dump is for, and what the kernel said of it */
enum netoops_kind {
	NETOOPS_OOPS,
	NETOOPS_PANIC,
	NETOOPS_SOFT,
};

struct netoops_detail {
	enum netoops_kind	kind;
	const struct pt_regs	*regs;		/* of the fault, or NULL */
	bool			panic_follows;	/* an oops that will panic */
};

#define NETOOPS_PARAM_BYTES	256
/* How long the dump waits for the targets lock before it goes without */
#define NETOOPS_LOCK_WAIT_US	10000

static char netoops_param[NETOOPS_PARAM_BYTES];
module_param_string(netoops, netoops_param, sizeof(netoops_param), 0);
MODULE_PARM_DESC(netoops,
		 " netoops=[src-port]@[src-ip]/[dev],[tgt-port]@<tgt-ip>/[tgt-macaddr] (several separated by ';')");

static unsigned int log_bytes = 2 << CONFIG_LOG_BUF_SHIFT;
module_param(log_bytes, uint, 0400);
MODULE_PARM_DESC(log_bytes,
		 "largest dump, in bytes of log text (default twice the log buffer)");

/* udelay() is not meant for long waits; a pause is at most a millisecond */
#define NETOOPS_PACE_MAX_US	1000

static unsigned int pace_us = 100;

static int netoops_pace_set(const char *val, const struct kernel_param *kp)
{
	unsigned int us;

	if (kstrtouint(val, 0, &us) || us > NETOOPS_PACE_MAX_US)
		return -EINVAL;
	WRITE_ONCE(pace_us, us);
	return 0;
}

static const struct kernel_param_ops netoops_pace_ops = {
	.set	= netoops_pace_set,
	.get	= param_get_uint,
};

module_param_cb(pace_us, &netoops_pace_ops, &pace_us, 0600);
MODULE_PARM_DESC(pace_us,
		 "pause after each packet to each target, in microseconds (0-1000), so that a slow NIC drains its ring (default 100)");

static unsigned int dump_limit = 8;
module_param(dump_limit, uint, 0600);
MODULE_PARM_DESC(dump_limit,
		 "oops and soft dumps sent per boot; panic dumps are always sent (default 8)");

/* A send to this target faulted: later dumps leave it alone. */
#define NETOOPS_TARGET_FAULTED	BIT(0)
/*
 * The panic dump found its device unable to transmit, or not letting go of
 * what it was given, for good
 */
#define NETOOPS_TARGET_STALLED	BIT(1)

/*
 * A panic dump whose send faults (a driver bug) starts over for the targets
 * that are left, at most this many times in all.
 */
#define NETOOPS_PANIC_TRIES	4

static struct netpoll_targets netoops_targets;

/*
 * A live dump (oops or soft) holds netoops_live_busy and uses the live
 * buffers; the panic dump holds netoops_panic_busy and uses buffers of its
 * own, so that it never waits for, nor mixes with, a live dump that another
 * CPU was sending when the panic began.  That live dump returns at its next
 * packet (panic_on_other_cpu()), so the panic stops its CPU with an
 * interrupt, not with an NMI in the middle of netpoll.
 */
struct netoops_buf {
	struct netoops_msg	msg;
	char			*log;
};

static unsigned long netoops_live_busy;
static unsigned long netoops_panic_busy;
static struct netoops_buf netoops_live;
static struct netoops_buf netoops_panic;
static atomic_t netoops_dump_id;
/* The target this CPU is transmitting to, to find one whose send faulted */
static DEFINE_PER_CPU(struct netpoll_target *, netoops_sending);

/* Counters, in sysfs: see netoops_count_attrs */
static atomic_t netoops_live_dumps;	/* live dumps started, for the limit */
static atomic_t netoops_dumps_sent;
static atomic_t netoops_dumps_skipped;
static atomic_t netoops_dumps_busy;
static atomic_t netoops_dumps_deferred;
static atomic_t netoops_targets_faulted;	/* sends that faulted */
static atomic_t netoops_panic_retries;	/* panic dumps started over */

/* The CPU sending the panic dump, or -1 */
static int netoops_panic_cpu = -1;
static int netoops_panic_faults;	/* targets_faulted when it started */
static unsigned int netoops_panic_tries;
static const struct pt_regs *netoops_panic_regs;	/* of its first try */

static u32 netoops_boot_id;

/*
 * The user blob is a latch: two copies and a sequence count whose low bit
 * says which copy readers use.  A writer stopped half way (by a panic's
 * NMI, say) leaves the copy that readers use whole, so the dump never
 * waits for it.
 */
struct netoops_blob {
	char	data[NETOOPS_BLOB_BYTES];
	size_t	len;
};

#define NETOOPS_BLOB_TRIES	4

static DEFINE_MUTEX(netoops_blob_mutex);	/* serialises writers */
static seqcount_latch_t netoops_blob_seq = SEQCNT_LATCH_ZERO(netoops_blob_seq);
static struct netoops_blob netoops_blobs[2];

static struct kobject *netoops_kobj;

/*
 * The registers of the fault, or all zero when the dump has none (a plain
 * panic, a soft dump): never the registers of netoops itself.
 */
static void netoops_fill_arch(struct netoops_arch_data *arch,
			      const struct pt_regs *regs)
{
	struct cpuinfo_x86 *c = &cpu_data(raw_smp_processor_id());

	arch->x86_vendor = c->x86_vendor;
	arch->x86_family = c->x86;
	arch->x86_model = c->x86_model;
	arch->x86_stepping = c->x86_stepping;
	if (regs)
		memcpy(&arch->regs, regs, sizeof(arch->regs));
	else
		memset(&arch->regs, 0, sizeof(arch->regs));
}

/* No wait: a few tries, then the copy the readers are pointed at. */
static void netoops_fill_blob(struct netoops_msg_header *h)
{
	unsigned int seq, tries = 0;

	do {
		seq = raw_read_seqcount_latch(&netoops_blob_seq);
		memcpy(h->user_blob, netoops_blobs[seq & 1].data,
		       sizeof(h->user_blob));
	} while (raw_read_seqcount_latch_retry(&netoops_blob_seq, seq) &&
		 ++tries < NETOOPS_BLOB_TRIES);
}

static void netoops_pause(unsigned int us)
{
	udelay(min_t(unsigned int, us, NETOOPS_PACE_MAX_US));
}

/*
 * The panic dump's packets are built in skbs of its own, allocated at load
 * time: netpoll_send_udp() takes netpoll's global skb pool lock and
 * allocates, which a panic must not do when the CPU it interrupted (an NMI
 * panic), or a CPU it stopped, holds that lock or a slab lock.  A pool skb
 * is ours again when the driver has let go of it: netoops keeps one
 * reference, so the driver's free only drops its own.
 *
 * Most NICs let go only in their NAPI poll, which nothing runs after a
 * panic, and stop their transmit queue when the ring is nearly full: the
 * dump then reaps the completions itself (netoops_reap_until()).
 *
 * Some devices never let go after a panic: a veth hands its packets to its
 * peer's backlog, which nothing processes any more.  With other targets to
 * send to, a target that holds NETOOPS_SKBS_PER_TARGET or more pool skbs
 * gets another only while more than that many are free; otherwise it waits
 * for reaping to bring it under its share, and is left alone if that does
 * not happen: such a device pins at most three quarters of the pool, and
 * the other targets go on with the rest.  A lone target, and a device that
 * frees sent skbs in its own transmit routine (virtio-net), are reaped only
 * when the pool is empty.
 */
#define NETOOPS_SKBS		64
#define NETOOPS_SKBS_PER_TARGET	(NETOOPS_SKBS / 4)
#define NETOOPS_SKB_BYTES	2048	/* headroom, headers and one payload */
/* How long a panic dump reaps completions for one packet, at most */
#define NETOOPS_REAP_US		20000
/* ... and for how long with the NAPI poll alone */
#define NETOOPS_REAP_NAPI_US	1000
#define NETOOPS_REAP_STEP_US	10

static struct sk_buff *netoops_skbs[NETOOPS_SKBS];
/* The target each pool skb was last sent to */
static struct netpoll_target *netoops_skb_target[NETOOPS_SKBS];
static unsigned int netoops_skb_next;
static bool netoops_pool_dry;		/* a wait for a pool skb ran out */

/* Panic-dump counters, in sysfs and on the console after the dump */
static atomic_t netoops_skb_drops;	/* no pool skb came free in time */
static atomic_t netoops_skb_unfit;	/* the device needs a larger skb */
static atomic_t netoops_pool_polls;	/* devices polled for completions */
static atomic_t netoops_stalled_skips;	/* the device cannot transmit */
static atomic_t netoops_panic_packets;	/* handed to the driver */

static bool netoops_target_usable(struct netpoll_target *nt)
{
	struct net_device *dev = nt->np.dev;

	return netpoll_target_enabled(nt) && dev &&
	       !(READ_ONCE(nt->flags) & NETOOPS_TARGET_FAULTED) &&
	       netif_running(dev) && netif_carrier_ok(dev);
}

static bool netoops_skb_held(const struct sk_buff *skb)
{
	return refcount_read(&skb->users) != 1 ||
	       atomic_read(&skb_shinfo(skb)->dataref) != 1;
}

/* A free pool skb, now @nt's, or NULL */
static struct sk_buff *netoops_pool_find(struct netpoll_target *nt)
{
	unsigned int i;

	for (i = 0; i < NETOOPS_SKBS; i++) {
		unsigned int slot = (netoops_skb_next + i) % NETOOPS_SKBS;
		struct sk_buff *skb = netoops_skbs[slot];
		void *head;

		if (netoops_skb_held(skb))
			continue;
		smp_rmb();	/* the driver's last access, before our reuse */
		netoops_skb_next = (slot + 1) % NETOOPS_SKBS;
		netoops_skb_target[slot] = nt;
		head = skb->head;
		memset(skb, 0, offsetof(struct sk_buff, tail));
		return build_skb_around(skb, head, 0);
	}
	return NULL;
}

/*
 * The device's NAPI poll with a budget of 0 (transmit completions only), as
 * netpoll's poll_napi() runs it, but without the driver's
 * ndo_poll_controller: e1000's and e1000e's take the interrupt descriptor's
 * lock, which an NMI panic must not take when it can do without.
 * NAPI_STATE_NPSVC keeps off a NAPI that is disabled (netpoll's rule).
 */
static void netoops_poll_napi(struct net_device *dev)
{
	int cpu = smp_processor_id();
	struct napi_struct *napi;

	list_for_each_entry_rcu(napi, &dev->napi_list, dev_list) {
		if (cmpxchg(&napi->poll_owner, -1, cpu) != -1)
			continue;
		if (!test_and_set_bit(NAPI_STATE_NPSVC, &napi->state)) {
			napi->poll(napi, 0);
			clear_bit(NAPI_STATE_NPSVC, &napi->state);
		}
		/* the poll's work done before the next owner's */
		smp_store_release(&napi->poll_owner, -1);
	}
}

/*
 * Is a transmit lock of @dev held?  After a panic nothing else transmits:
 * it is held for good, by a CPU the panic stopped or by the code this NMI
 * interrupted.  Such a device is neither sent to (netpoll would try the
 * lock for a jiffy, then park the packet for a worker that never runs) nor
 * polled (some drivers, tg3 and bnx2 among them, take it in their poll).
 */
static bool netoops_dev_locked(struct net_device *dev)
{
	unsigned int i;

	for (i = 0; i < dev->num_tx_queues; i++)
		if (READ_ONCE(netdev_get_tx_queue(dev, i)->xmit_lock_owner) != -1)
			return true;
	return false;
}

/*
 * disable_hardirq() in e1000's and e1000e's ndo_poll_controller waits,
 * without a bound, for a run of the interrupt handler that a stopped CPU
 * will never finish: no controller then.
 */
static bool netoops_irq_busy(struct net_device *dev)
{
	struct irq_data *d = dev->irq ? irq_get_irq_data(dev->irq) : NULL;

	return d && irqd_irq_inprogress(d);
}

/*
 * Reap the transmit completions of every device the dump sends through.
 * A fault in a driver's poll is charged to the target whose device it is.
 */
static void netoops_reap(bool controller)
{
	struct netpoll_target *nt, *sending = this_cpu_read(netoops_sending);

	netpoll_targets_for_each(nt, &netoops_targets) {
		struct net_device *dev = nt->np.dev;

		if (!netoops_target_usable(nt) || netoops_dev_locked(dev))
			continue;
		atomic_inc(&netoops_pool_polls);
		this_cpu_write(netoops_sending, nt);
		if (controller && !netoops_irq_busy(dev))
			netpoll_poll_dev(dev);
		else
			netoops_poll_napi(dev);
	}
	this_cpu_write(netoops_sending, sending);
}

/*
 * Reap completions until @ready() says yes: every 10 us, with the NAPI poll
 * alone for the first millisecond (NICs that clean their ring in NAPI
 * need no more), then with netpoll_poll_dev(), which also runs the
 * driver's ndo_poll_controller (QEMU's e1000e needs it), for
 * NETOOPS_REAP_US at most.  With *@dry set (a wait for the same thing ran
 * out before) it reaps once and does not wait; it sets or clears *@dry.
 */
static bool netoops_reap_until(bool (*ready)(void *arg), void *arg,
			       bool *dry)
{
	unsigned int us = 0;

	while (!ready(arg)) {
		netoops_reap(*dry || us >= NETOOPS_REAP_NAPI_US);
		if (ready(arg))
			break;
		if (*dry || us >= NETOOPS_REAP_US) {
			*dry = true;
			return false;
		}
		udelay(NETOOPS_REAP_STEP_US);
		us += NETOOPS_REAP_STEP_US;
		touch_nmi_watchdog();
	}
	*dry = false;
	return true;
}

struct netoops_pool_wait {
	struct netpoll_target	*nt;
	struct sk_buff		*skb;
};

static bool netoops_pool_ready(void *arg)
{
	struct netoops_pool_wait *w = arg;

	w->skb = netoops_pool_find(w->nt);
	return w->skb;
}

/*
 * May @arg (a target) take another pool skb: does it hold fewer than its
 * share, or are more than that many free?
 */
static bool netoops_share_ready(void *arg)
{
	unsigned int i, held = 0, free = 0;

	for (i = 0; i < NETOOPS_SKBS; i++) {
		if (!netoops_skb_held(netoops_skbs[i]))
			free++;
		else if (netoops_skb_target[i] == arg)
			held++;
	}
	return held < NETOOPS_SKBS_PER_TARGET || free > NETOOPS_SKBS_PER_TARGET;
}

/* Is @nt the only target the panic dump still sends to? */
static bool netoops_lone_target(struct netpoll_target *nt)
{
	struct netpoll_target *other;

	netpoll_targets_for_each(other, &netoops_targets)
		if (other != nt && netoops_target_usable(other) &&
		    !(READ_ONCE(other->flags) & NETOOPS_TARGET_STALLED))
			return false;
	return true;
}

static bool netoops_queues_ready(void *arg)
{
	struct net_device *dev = arg;
	unsigned int i;

	for (i = 0; i < dev->real_num_tx_queues; i++)
		if (netif_xmit_stopped(netdev_get_tx_queue(dev, i)))
			return false;
	return true;
}

/*
 * Can netpoll hand a packet to @nt's device at once?  Not with a transmit
 * lock held for good (netoops_dev_locked()), nor with a packet parked on
 * netpoll's queue (every later one would queue behind it).  A stopped
 * queue (the ring is nearly full; netoops cannot tell which queue netpoll
 * will pick, so every queue counts) is reaped until it wakes: netpoll would
 * poll it only with the driver's controller.  Nor when the target holds
 * its share of the pool, other targets need the rest, and reaping frees
 * none of it.  A device that fails once is left alone for the rest of the
 * panic.
 */
static bool netoops_dev_ready(struct netpoll_target *nt)
{
	struct net_device *dev = nt->np.dev;
	struct netpoll_info *ni = rcu_dereference_bh(dev->npinfo);
	bool dry = false;

	if (!(READ_ONCE(nt->flags) & NETOOPS_TARGET_STALLED) && ni &&
	    !skb_queue_len(&ni->txq) && !netoops_dev_locked(dev) &&
	    netoops_reap_until(netoops_queues_ready, dev, &dry) &&
	    (netoops_lone_target(nt) ||
	     netoops_reap_until(netoops_share_ready, nt, &dry)))
		return true;
	WRITE_ONCE(nt->flags, nt->flags | NETOOPS_TARGET_STALLED);
	return false;
}

/* What netpoll_send_udp() sends, from a pool skb. */
static void netoops_send_pool(struct netpoll_target *nt, const void *msg,
			      int len)
{
	struct netpoll *np = &nt->np;
	int udp_len = len + sizeof(struct udphdr);
	int ip_len = udp_len + (np->ipv6 ? sizeof(struct ipv6hdr) :
					   sizeof(struct iphdr));
	int reserve = LL_RESERVED_SPACE(np->dev);
	struct netoops_pool_wait w = { .nt = nt };
	static atomic_t ip_ident;
	struct sk_buff *skb;
	struct udphdr *udph;
	struct ethhdr *eth;

	if (reserve + ip_len + np->dev->needed_tailroom > NETOOPS_SKB_BYTES) {
		atomic_inc(&netoops_skb_unfit);
		return;
	}
	if (!netoops_dev_ready(nt)) {
		atomic_inc(&netoops_stalled_skips);
		return;
	}
	if (!netoops_reap_until(netoops_pool_ready, &w, &netoops_pool_dry)) {
		atomic_inc(&netoops_skb_drops);
		return;
	}
	skb = w.skb;
	skb_reserve(skb, reserve + ip_len - len);
	skb_put_data(skb, msg, len);

	udph = skb_push(skb, sizeof(*udph));
	skb_reset_transport_header(skb);
	udph->source = htons(np->local_port);
	udph->dest = htons(np->remote_port);
	udph->len = htons(udp_len);
	udph->check = 0;
	if (np->ipv6) {
		struct ipv6hdr *ip6h;

		udph->check = csum_ipv6_magic(&np->local_ip.in6,
					      &np->remote_ip.in6, udp_len,
					      IPPROTO_UDP,
					      csum_partial(udph, udp_len, 0));
		ip6h = skb_push(skb, sizeof(*ip6h));
		skb_reset_network_header(skb);
		memset(ip6h, 0, sizeof(*ip6h));
		ip6h->version = 6;
		ip6h->payload_len = htons(udp_len);
		ip6h->nexthdr = IPPROTO_UDP;
		ip6h->hop_limit = 32;
		ip6h->saddr = np->local_ip.in6;
		ip6h->daddr = np->remote_ip.in6;
		skb->protocol = htons(ETH_P_IPV6);
	} else {
		struct iphdr *iph;

		udph->check = csum_tcpudp_magic(np->local_ip.ip,
						np->remote_ip.ip, udp_len,
						IPPROTO_UDP,
						csum_partial(udph, udp_len, 0));
		iph = skb_push(skb, sizeof(*iph));
		skb_reset_network_header(skb);
		memset(iph, 0, sizeof(*iph));
		iph->version = 4;
		iph->ihl = 5;
		put_unaligned(htons(ip_len), &iph->tot_len);
		iph->id = htons(atomic_inc_return(&ip_ident));
		iph->ttl = 64;
		iph->protocol = IPPROTO_UDP;
		put_unaligned(np->local_ip.ip, &iph->saddr);
		put_unaligned(np->remote_ip.ip, &iph->daddr);
		iph->check = ip_fast_csum((unsigned char *)iph, iph->ihl);
		skb->protocol = htons(ETH_P_IP);
	}
	if (udph->check == 0)
		udph->check = CSUM_MANGLED_0;

	eth = skb_push(skb, ETH_HLEN);
	skb_reset_mac_header(skb);
	eth->h_proto = skb->protocol;
	ether_addr_copy(eth->h_source, np->dev->dev_addr);
	ether_addr_copy(eth->h_dest, np->remote_mac);
	skb->dev = np->dev;

	skb_get(skb);		/* ours: see netoops_pool_find() */
	atomic_inc(&netoops_panic_packets);
	netpoll_send_skb(np, skb);
}

/*
 * A panic dump sends only from the pool: a packet that has no pool skb is
 * dropped and counted, never handed to the allocator.
 */
static void netoops_send_one(struct netpoll_target *nt,
			     const struct netoops_msg *msg,
			     enum netoops_kind reason)
{
	if (reason == NETOOPS_PANIC)
		netoops_send_pool(nt, msg, sizeof(*msg));
	else
		netpoll_send_udp(&nt->np, (const char *)msg, sizeof(*msg));
}

static int __init netoops_pool_alloc(void)
{
	unsigned int i;

	for (i = 0; i < NETOOPS_SKBS; i++) {
		netoops_skbs[i] = alloc_skb(NETOOPS_SKB_BYTES, GFP_KERNEL);
		if (!netoops_skbs[i])
			return -ENOMEM;
	}
	return 0;
}

static void netoops_pool_free(void)
{
	unsigned int i;

	/* A driver that still holds one frees it when it is done. */
	for (i = 0; i < NETOOPS_SKBS; i++)
		kfree_skb(netoops_skbs[i]);
}

/* Send @msg to every enabled target that is up and has not faulted. */
static void netoops_send_msg(const struct netoops_msg *msg,
			     enum netoops_kind reason)
{
	struct netpoll_target *nt;

	netpoll_targets_for_each(nt, &netoops_targets) {
		if (!netoops_target_usable(nt))
			continue;
		this_cpu_write(netoops_sending, nt);
		netoops_send_one(nt, msg, reason);
		this_cpu_write(netoops_sending, NULL);
		/*
		 * netpoll queues a packet for a workqueue, which never runs
		 * after a panic, when the device's queue stays stopped for a
		 * jiffy, and every later packet behind it: give the device
		 * time to drain, after every packet, so that several targets
		 * on one device are paced too.
		 */
		netoops_pause(READ_ONCE(pace_us));
		touch_nmi_watchdog();
	}
}

/*
 * Send @msg with interrupts off (netpoll needs them off) and the targets
 * lock held, waiting for the lock a bounded time.  On a panic the other
 * CPUs are stopped and one of them may hold the lock for good: the list
 * only changes in process context, so the dump then walks it without the
 * lock, and stops trying to take it.  A live system is better left alone:
 * the dump gives up.
 */
static bool netoops_send_chunk(const struct netoops_msg *msg,
			       enum netoops_kind reason, bool *lockless)
{
	unsigned long flags;
	bool sent = true;
	unsigned int us;

	local_irq_save(flags);
	for (us = 0; !*lockless && us < NETOOPS_LOCK_WAIT_US; us++) {
		if (spin_trylock(&netoops_targets.lock)) {
			netoops_send_msg(msg, reason);
			spin_unlock(&netoops_targets.lock);
			goto out;
		}
		if (reason != NETOOPS_PANIC && netoops_make_way())
			break;
		udelay(1);
	}
	if (reason == NETOOPS_PANIC) {
		*lockless = true;
		netoops_send_msg(msg, reason);
	} else {
		sent = false;
	}
out:
	local_irq_restore(flags);
	return sent;
}

static void netoops_send_log(struct netoops_buf *buf, size_t len,
			     enum netoops_kind reason, bool lockless)
{
	struct netoops_msg *msg = &buf->msg;
	struct netoops_msg_header *h = &msg->header;
	u32 count = max_t(u32, DIV_ROUND_UP(len, NETOOPS_DATA_BYTES), 1);
	u32 copy, no;

	h->packet_count = cpu_to_le32(count);
	for (copy = 0; copy < NETOOPS_RETRANSMIT_COUNT; copy++) {
		/* Newest chunk first: packet 0 ends with the last line. */
		for (no = 0; no < count; no++) {
			size_t start = (size_t)(count - 1 - no) * NETOOPS_DATA_BYTES;
			size_t n = min_t(size_t, len - min(len, start),
					 NETOOPS_DATA_BYTES);

			/* A live dump makes way for a panic on another CPU. */
			if (reason != NETOOPS_PANIC && netoops_make_way())
				return;
			h->packet_no = cpu_to_le32(no);
			memcpy(msg->data, buf->log + start, n);
			memset(msg->data + n, 0, NETOOPS_DATA_BYTES - n);
			if (!netoops_send_chunk(msg, reason, &lockless))
				return;
		}
	}
}

/* Fill in @buf for a dump of the whole log and send it. */
static void netoops_send_dump(struct netoops_buf *buf,
			      enum netoops_kind reason,
			      const struct pt_regs *regs, bool lockless)
{
	struct netoops_msg *msg = &buf->msg;
	struct netoops_msg_header *h = &msg->header;
	struct kmsg_dump_iter iter;
	size_t len = 0;

	atomic_inc(&netoops_dumps_sent);
	/* With the <N> level prefixes, as syslog(2) reads the log */
	kmsg_dump_rewind(&iter);
	kmsg_dump_get_buffer(&iter, true, buf->log, log_bytes, &len);

	memset(h, 0, sizeof(*h));
	h->version = cpu_to_le16(NETOOPS_VERSION);
	h->dump_id = cpu_to_le16((u16)atomic_inc_return(&netoops_dump_id));
	h->data_offset = cpu_to_le16(offsetof(struct netoops_msg, data));
	h->arch = cpu_to_le16(NETOOPS_ARCH_X86);
	h->arch_offset = cpu_to_le16(offsetof(struct netoops_msg, arch_data));
	h->type = cpu_to_le16(reason == NETOOPS_SOFT ?
			      NETOOPS_TYPE_PRINTK_BUFFER_SOFT :
			      NETOOPS_TYPE_PRINTK_BUFFER);
	h->boot_id = cpu_to_le32(READ_ONCE(netoops_boot_id));
	strscpy_pad(h->kernel_version, init_utsname()->release,
		    sizeof(h->kernel_version));
	netoops_fill_blob(h);
	netoops_fill_arch(&msg->arch_data, regs);

	netoops_send_log(buf, len, reason, lockless);
}

/*
 * An oops on a CPU that was transmitting to a target: that send faulted.
 * Leave the target alone from now on (until it is enabled again); its
 * device may be wedged.  A panic without an oops (an NMI, say) that
 * interrupted a send says nothing about the target: netpoll copes with a
 * transmit lock that the interrupted send holds.
 */
/* Was this CPU sending the panic dump (an oops inside it, say)? */
static bool netoops_in_panic_dump(void)
{
	return READ_ONCE(netoops_panic_cpu) == raw_smp_processor_id();
}

static void netoops_check_faulted(const struct netoops_detail *detail)
{
	struct netpoll_target *nt = this_cpu_read(netoops_sending);

	if (!nt || !detail->regs)
		return;
	this_cpu_write(netoops_sending, NULL);
	WRITE_ONCE(nt->flags, nt->flags | NETOOPS_TARGET_FAULTED);
	atomic_inc(&netoops_targets_faulted);
	pr_emerg("a send through %s faulted; that target is skipped from now on\n",
		 nt->np.dev_name);
	/*
	 * In the panic dump (the other CPUs are stopped, the list cannot
	 * change) the other targets on that device go too: the dead send
	 * holds its locks.
	 */
	if (netoops_in_panic_dump()) {
		struct netpoll_target *other;

		netpoll_targets_for_each(other, &netoops_targets)
			if (other->np.dev == nt->np.dev)
				WRITE_ONCE(other->flags,
					   other->flags | NETOOPS_TARGET_FAULTED);
	}
}

/* A target enabled again (from configfs) is given another chance. */
static void netoops_target_enabled(struct netpoll_target *nt)
{
	WRITE_ONCE(nt->flags, nt->flags & ~NETOOPS_TARGET_FAULTED);
}

static const struct netpoll_target_ops netoops_target_ops = {
	.enabled	= netoops_target_enabled,
};

/* What the panic dump did, on the console after it */
static void netoops_report_panic(void)
{
	pr_emerg("panic dump: %d packets sent, %d dropped, %d unfit, %d stalled, %d polls, %d retries\n",
		 atomic_read(&netoops_panic_packets),
		 atomic_read(&netoops_skb_drops),
		 atomic_read(&netoops_skb_unfit),
		 atomic_read(&netoops_stalled_skips),
		 atomic_read(&netoops_pool_polls),
		 atomic_read(&netoops_panic_retries));
}

static void netoops_dump_panic(const struct netoops_detail *detail)
{
	int faults = atomic_read(&netoops_targets_faulted);
	bool retry = false;

	/*
	 * Only the panic's own CPU gets here.  A second time, the dump
	 * faulted: when a send faulted (that target is now skipped), the dump
	 * starts over for the targets that are left, a bounded number of
	 * times; a fault of netoops's own gives up.
	 */
	if (test_and_set_bit(0, &netoops_panic_busy)) {
		if (faults == netoops_panic_faults ||
		    ++netoops_panic_tries >= NETOOPS_PANIC_TRIES) {
			atomic_inc(&netoops_dumps_busy);
			return;
		}
		atomic_inc(&netoops_panic_retries);
		retry = true;
	}
	netoops_panic_faults = faults;
	/* The retry sends what the panic was about, not the driver's fault */
	if (!retry)
		netoops_panic_regs = detail->regs;
	WRITE_ONCE(netoops_panic_cpu, raw_smp_processor_id());
	/*
	 * The dump that faulted holds the targets lock for good: the retry
	 * walks the list without it.
	 */
	netoops_send_dump(&netoops_panic, NETOOPS_PANIC, netoops_panic_regs,
			  retry);
	netoops_report_panic();
	/* The panic goes on to reboot or halt: the bit stays set. */
}

static void netoops_dump_live(const struct netoops_detail *detail)
{
	/* The panic that ends this oops sends the same log and registers. */
	if (detail->kind == NETOOPS_OOPS && detail->panic_follows) {
		atomic_inc(&netoops_dumps_deferred);
		return;
	}
	/*
	 * Live dumps send through netpoll_send_udp(), which allocates: none
	 * from NMI context (an oops there that does not panic).
	 */
	if (in_nmi()) {
		atomic_inc(&netoops_dumps_skipped);
		return;
	}
	/* One live dump at a time, and none once a panic dump started. */
	if (test_bit(0, &netoops_panic_busy) ||
	    test_and_set_bit(0, &netoops_live_busy)) {
		atomic_inc(&netoops_dumps_busy);
		return;
	}
	if (atomic_inc_return(&netoops_live_dumps) > READ_ONCE(dump_limit)) {
		if (atomic_inc_return(&netoops_dumps_skipped) == 1)
			pr_warn("dump_limit (%u) reached: no more oops or soft dumps this boot\n",
				READ_ONCE(dump_limit));
	} else {
		netoops_send_dump(&netoops_live, detail->kind, detail->regs,
				  false);
	}
	/*
	 * An oops or a soft dump returns.  A fault inside the dump does not:
	 * the bit stays set, later live dumps count as busy, and the panic
	 * dump still goes out.
	 */
	clear_bit(0, &netoops_live_busy);
}

static void netoops_dump(const struct netoops_detail *detail)
{
	switch (detail->kind) {
	case NETOOPS_PANIC:
		netoops_check_faulted(detail);
		netoops_dump_panic(detail);
		break;
	case NETOOPS_OOPS:
	case NETOOPS_SOFT:
		netoops_check_faulted(detail);
		/*
		 * An oops inside the panic dump (a driver faulted under it)
		 * must not end in make_task_dead() of the panicking task: the
		 * machine would never reboot.  Panic again; the panic dump
		 * then starts over for the targets that are left.
		 */
		if (detail->kind == NETOOPS_OOPS && netoops_in_panic_dump()) {
			if (!detail->panic_follows)
				panic("netoops: a send in the panic dump faulted");
			break;
		}
		netoops_dump_live(detail);
		break;
	}
}

#ifdef KMSG_DUMP_HAVE_DETAIL
static void netoops_dump_kmsg(struct kmsg_dumper *dumper,
			      const struct kmsg_dump_detail *kd)
{
	struct netoops_detail detail = {
		.regs = kd->regs,
		.panic_follows = kd->panic_follows,
	};

	switch (kd->reason) {
	case KMSG_DUMP_OOPS:
		detail.kind = NETOOPS_OOPS;
		break;
	case KMSG_DUMP_PANIC:
		detail.kind = NETOOPS_PANIC;
		break;
	case KMSG_DUMP_SOFT:
		detail.kind = NETOOPS_SOFT;
		break;
	default:
		return;
	}
	netoops_dump(&detail);
}

static struct kmsg_dumper netoops_dumper = {
	.dump_detail	= netoops_dump_kmsg,
	.max_reason	= KMSG_DUMP_OOPS,
	.soft_dump	= true,
};

static int netoops_stock_init(void)
{
	return 0;
}

static void netoops_stock_exit(void)
{
}
#else /* a stock kernel */
/*
 * The registers of each CPU's latest oops, copied by the die notifier
 * (DIE_OOPS comes before the OOPS dump and the panic that may follow).  A
 * dump takes the copy that the current task made: the task may have moved
 * to another CPU since, and a task that oopsed and died must not hand its
 * registers to a later task at the same address, hence the start time.
 * An oops inside the handling of another one of the same task (the copy is
 * still open: the first one's OOPS dump has not run) keeps the first one's
 * registers, as the patched kernel does.
 */
struct netoops_oops_regs {
	const struct task_struct	*task;
	u64				start_time;
	bool				open;
	struct pt_regs			regs;
};

static DEFINE_PER_CPU(struct netoops_oops_regs, netoops_oops_regs);

static int netoops_die(struct notifier_block *nb, unsigned long val, void *data)
{
	struct netoops_oops_regs *r = this_cpu_ptr(&netoops_oops_regs);
	struct die_args *args = data;

	if (val != DIE_OOPS || !args->regs)
		return NOTIFY_DONE;
	if (r->open && READ_ONCE(r->task) == current &&
	    r->start_time == current->start_time)
		return NOTIFY_DONE;
	r->task = NULL;
	barrier();
	r->regs = *args->regs;
	r->start_time = current->start_time;
	r->open = true;
	barrier();
	WRITE_ONCE(r->task, current);
	return NOTIFY_DONE;
}

static struct notifier_block netoops_die_nb = {
	.notifier_call	= netoops_die,
};

/*
 * Whether this panic ends an oops: x86's oops_end() panics with "Fatal
 * exception" (or "Fatal exception in interrupt").  Any other panic, in a
 * task that oopsed earlier too (a soft lockup in do_exit(), say), carries
 * no registers.  The panic notifiers run before the panic's dump.
 */
static bool netoops_panic_ends_oops;

static int netoops_panic_notify(struct notifier_block *nb, unsigned long val,
				void *msg)
{
	WRITE_ONCE(netoops_panic_ends_oops,
		   msg && str_has_prefix(msg, "Fatal exception"));
	return NOTIFY_DONE;
}

static struct notifier_block netoops_panic_nb = {
	.notifier_call	= netoops_panic_notify,
	.priority	= INT_MAX,
};

static struct netoops_oops_regs *netoops_oops_regs_of_current(void)
{
	int cpu;

	for_each_possible_cpu(cpu) {
		struct netoops_oops_regs *r = per_cpu_ptr(&netoops_oops_regs, cpu);

		if (READ_ONCE(r->task) == current &&
		    r->start_time == current->start_time)
			return r;
	}
	return NULL;
}

static void netoops_dump_kmsg(struct kmsg_dumper *dumper,
			      enum kmsg_dump_reason reason)
{
	struct netoops_oops_regs *r = netoops_oops_regs_of_current();
	struct netoops_detail detail = {
		.regs = r && (reason != KMSG_DUMP_PANIC ||
			      READ_ONCE(netoops_panic_ends_oops)) ?
			&r->regs : NULL,
		/*
		 * panic_on_oops is not exported: only an oops in interrupt
		 * context is known to end in a panic.
		 */
		.panic_follows = in_interrupt(),
	};

	if (reason == KMSG_DUMP_OOPS)
		detail.kind = NETOOPS_OOPS;
	else if (reason == KMSG_DUMP_PANIC)
		detail.kind = NETOOPS_PANIC;
	else
		return;
	netoops_dump(&detail);
	/* The end of that oops: a later one of this task is a new one. */
	if (r && reason == KMSG_DUMP_OOPS)
		r->open = false;
}

static struct kmsg_dumper netoops_dumper = {
	.dump		= netoops_dump_kmsg,
	.max_reason	= KMSG_DUMP_OOPS,
};

/* sysrq y: the stock kernel has no soft dump of its own */
static void netoops_sysrq_soft(int key)
{
	struct netoops_detail detail = { .kind = NETOOPS_SOFT };

	netoops_dump(&detail);
}

static const struct sysrq_key_op netoops_sysrq_op = {
	.handler	= netoops_sysrq_soft,
	.help_msg	= "soft-dump(y)",
	.action_msg	= "Trigger a soft dump",
	.enable_mask	= SYSRQ_ENABLE_DUMP,
};

static int netoops_stock_init(void)
{
	int err;

	err = register_die_notifier(&netoops_die_nb);
	if (err)
		return err;
	err = register_sysrq_key('y', &netoops_sysrq_op);
	if (err) {
		unregister_die_notifier(&netoops_die_nb);
		return err;
	}
	atomic_notifier_chain_register(&panic_notifier_list, &netoops_panic_nb);
	return 0;
}

static void netoops_stock_exit(void)
{
	atomic_notifier_chain_unregister(&panic_notifier_list, &netoops_panic_nb);
	unregister_sysrq_key('y', &netoops_sysrq_op);
	unregister_die_notifier(&netoops_die_nb);
}
#endif

static ssize_t netoops_boot_id_show(struct kobject *kobj,
				    struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(netoops_boot_id));
}

static ssize_t netoops_boot_id_store(struct kobject *kobj,
				     struct kobj_attribute *attr,
				     const char *buf, size_t count)
{
	u32 id;
	int err;

	/* Decimal or 0x-hex; anything else, or wider than 32 bits, is invalid */
	err = kstrtou32(buf, 0, &id);
	if (err)
		return -EINVAL;
	WRITE_ONCE(netoops_boot_id, id);
	return count;
}

static ssize_t netoops_user_blob_show(struct kobject *kobj,
				      struct kobj_attribute *attr, char *buf)
{
	size_t len;

	mutex_lock(&netoops_blob_mutex);
	len = netoops_blobs[0].len;
	memcpy(buf, netoops_blobs[0].data, len);
	mutex_unlock(&netoops_blob_mutex);
	return len;
}

static void netoops_blob_set(struct netoops_blob *b, const char *buf,
			     size_t count)
{
	memset(b->data, 0, sizeof(b->data));
	memcpy(b->data, buf, count);
	b->len = count;
}

static ssize_t netoops_user_blob_store(struct kobject *kobj,
				       struct kobj_attribute *attr,
				       const char *buf, size_t count)
{
	if (count > NETOOPS_BLOB_BYTES)
		return -EINVAL;
	mutex_lock(&netoops_blob_mutex);
	raw_write_seqcount_latch(&netoops_blob_seq);	/* readers: copy 1 */
	netoops_blob_set(&netoops_blobs[0], buf, count);
	raw_write_seqcount_latch(&netoops_blob_seq);	/* readers: copy 0 */
	netoops_blob_set(&netoops_blobs[1], buf, count);
	mutex_unlock(&netoops_blob_mutex);
	return count;
}

/* The counters: read-only sysfs files of their own names */
struct netoops_count_attr {
	struct kobj_attribute	attr;
	atomic_t		*count;
};

static ssize_t netoops_count_show(struct kobject *kobj,
				  struct kobj_attribute *attr, char *buf)
{
	struct netoops_count_attr *ca =
		container_of(attr, struct netoops_count_attr, attr);

	return sysfs_emit(buf, "%d\n", atomic_read(ca->count));
}

#define NETOOPS_COUNT_ATTR(_name) {					\
	.attr = __ATTR(_name, 0444, netoops_count_show, NULL),		\
	.count = &netoops_##_name,					\
}

static struct netoops_count_attr netoops_count_attrs[] = {
	NETOOPS_COUNT_ATTR(dumps_sent),
	NETOOPS_COUNT_ATTR(dumps_skipped),
	NETOOPS_COUNT_ATTR(dumps_busy),
	NETOOPS_COUNT_ATTR(dumps_deferred),
	NETOOPS_COUNT_ATTR(skb_drops),
	NETOOPS_COUNT_ATTR(skb_unfit),
	NETOOPS_COUNT_ATTR(pool_polls),
	NETOOPS_COUNT_ATTR(stalled_skips),
	NETOOPS_COUNT_ATTR(panic_packets),
	NETOOPS_COUNT_ATTR(panic_retries),
	NETOOPS_COUNT_ATTR(targets_faulted),
};

static ssize_t netoops_mode_show(struct kobject *kobj,
				 struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n", NETOOPS_MODE);
}

static struct kobj_attribute netoops_mode_attr =
	__ATTR(mode, 0444, netoops_mode_show, NULL);
static struct kobj_attribute netoops_boot_id_attr =
	__ATTR(netoops_boot_id, 0644, netoops_boot_id_show,
	       netoops_boot_id_store);
static struct kobj_attribute netoops_user_blob_attr =
	__ATTR(netoops_user_blob, 0644, netoops_user_blob_show,
	       netoops_user_blob_store);

static struct attribute *netoops_attrs[] = {
	&netoops_boot_id_attr.attr,
	&netoops_user_blob_attr.attr,
	&netoops_mode_attr.attr,
	&netoops_count_attrs[0].attr.attr,
	&netoops_count_attrs[1].attr.attr,
	&netoops_count_attrs[2].attr.attr,
	&netoops_count_attrs[3].attr.attr,
	&netoops_count_attrs[4].attr.attr,
	&netoops_count_attrs[5].attr.attr,
	&netoops_count_attrs[6].attr.attr,
	&netoops_count_attrs[7].attr.attr,
	&netoops_count_attrs[8].attr.attr,
	&netoops_count_attrs[9].attr.attr,
	&netoops_count_attrs[10].attr.attr,
	NULL,
};

static const struct attribute_group netoops_attr_group = {
	.attrs = netoops_attrs,
};

static void __init netoops_check_layout(void)
{
	BUILD_BUG_ON(offsetof(struct netoops_msg, header.version) != 0);
	BUILD_BUG_ON(offsetof(struct netoops_msg, header.dump_id) != 2);
	BUILD_BUG_ON(offsetof(struct netoops_msg, header.data_offset) != 4);
	BUILD_BUG_ON(offsetof(struct netoops_msg, header.arch) != 6);
	BUILD_BUG_ON(offsetof(struct netoops_msg, header.arch_offset) != 8);
	BUILD_BUG_ON(offsetof(struct netoops_msg, header.type) != 10);
	BUILD_BUG_ON(offsetof(struct netoops_msg, header.packet_count) != 12);
	BUILD_BUG_ON(offsetof(struct netoops_msg, header.packet_no) != 16);
	BUILD_BUG_ON(offsetof(struct netoops_msg, header.boot_id) != 20);
	BUILD_BUG_ON(offsetof(struct netoops_msg, header.kernel_version) != 24);
	BUILD_BUG_ON(offsetof(struct netoops_msg, header.user_blob) != 88);
	BUILD_BUG_ON(offsetof(struct netoops_msg, arch_data) != 216);
	BUILD_BUG_ON(offsetof(struct netoops_msg, arch_data.regs) != 220);
	BUILD_BUG_ON(sizeof(struct pt_regs) != 168);
	BUILD_BUG_ON(offsetof(struct netoops_msg, data) != 388);
	BUILD_BUG_ON(sizeof(struct netoops_msg) != 1412);
}

static int __init netoops_init(void)
{
	int err;

	netoops_check_layout();
	if (log_bytes < NETOOPS_DATA_BYTES) {
		pr_err("log_bytes must be at least %d\n", NETOOPS_DATA_BYTES);
		return -EINVAL;
	}
	netoops_live.log = vmalloc(log_bytes);
	netoops_panic.log = vmalloc(log_bytes);
	if (!netoops_live.log || !netoops_panic.log) {
		err = -ENOMEM;
		goto err_free_log;
	}
	err = netoops_pool_alloc();
	if (err)
		goto err_free_log;
	atomic_set(&netoops_dump_id, get_random_u16());

	netoops_kobj = kobject_create_and_add("netoops", kernel_kobj);
	if (!netoops_kobj) {
		err = -ENOMEM;
		goto err_free_log;
	}
	err = sysfs_create_group(netoops_kobj, &netoops_attr_group);
	if (err)
		goto err_put_kobj;

	netoops_targets.ops = &netoops_target_ops;
	netoops_targets.default_local_port = NETOOPS_PORT;
	netoops_targets.default_remote_port = NETOOPS_PORT;
	err = register_netpoll_targets(&netoops_targets, "netoops",
				       netoops_param);
	if (err)
		goto err_put_kobj;

	err = kmsg_dump_register(&netoops_dumper);
	if (err)
		goto err_unregister_targets;
	err = netoops_stock_init();
	if (err)
		goto err_unregister_dumper;
	pr_info("running on a %s kernel\n", NETOOPS_MODE);
	return 0;

err_unregister_dumper:
	kmsg_dump_unregister(&netoops_dumper);

err_unregister_targets:
	unregister_netpoll_targets(&netoops_targets);
err_put_kobj:
	kobject_put(netoops_kobj);
err_free_log:
	netoops_pool_free();
	vfree(netoops_panic.log);
	vfree(netoops_live.log);
	return err;
}

static void __exit netoops_exit(void)
{
	netoops_stock_exit();
	kmsg_dump_unregister(&netoops_dumper);
	unregister_netpoll_targets(&netoops_targets);
	kobject_put(netoops_kobj);
	netoops_pool_free();
	vfree(netoops_panic.log);
	vfree(netoops_live.log);
}

module_init(netoops_init);
module_exit(netoops_exit);
MODULE_LICENSE("GPL");
MODULE_VERSION(NETOOPS_MODULE_VERSION);
MODULE_DESCRIPTION("Send the kernel log and crash facts over UDP on oops and panic");
MODULE_INFO(netoops_mode, NETOOPS_MODE);
