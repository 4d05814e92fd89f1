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
 * allocator.  It hands its packets to the driver itself, on any transmit
 * queue it can lock, and to the NIC below a bridge, VLAN or macvlan target
 * (netpoll gives up on all of these after a panic: a panic inside the NIC's
 * own receive poll, one busy queue of many, a stacked device whose lower
 * NIC nobody reaps).  Oops and soft dumps send through netpoll_send_udp(),
 * which takes one skb per packet (GFP_ATOMIC, falling back on netpoll's
 * pool of 32).  No dump takes a sleeping lock; they run with interrupts
 * off while they transmit and wait only for bounded times (the README
 * lists each).
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
#include <linux/if_macvlan.h>
#include <linux/if_vlan.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/irq.h>
#include <linux/irqdesc.h>
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
#include <linux/pci.h>
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

/*
 * Bits of nt->flags, changed with atomic bit operations: a configfs write
 * (netoops_target_enabled()) may race with a dump.
 *
 * A send to this target faulted: later dumps leave it alone.
 */
#define NETOOPS_TARGET_FAULTED	0
/*
 * The panic dump found its device unable to transmit, or not letting go of
 * what it was given, for good
 */
#define NETOOPS_TARGET_STALLED	1

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
/* ... and whether that send runs in an NMI */
static DEFINE_PER_CPU(bool, netoops_sending_nmi);

static void netoops_set_sending(struct netpoll_target *nt)
{
	this_cpu_write(netoops_sending_nmi, !!in_nmi());
	this_cpu_write(netoops_sending, nt);
}

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
static u16 netoops_panic_id;				/* of every try */

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

/*
 * No wait: a few tries.  A copy that changed under every try (a writer
 * running on another CPU all along) is not sent: the blob goes empty
 * rather than torn.
 */
static void netoops_fill_blob(struct netoops_msg_header *h)
{
	unsigned int seq, tries;

	for (tries = 0; tries < NETOOPS_BLOB_TRIES; tries++) {
		seq = raw_read_seqcount_latch(&netoops_blob_seq);
		memcpy(h->user_blob, netoops_blobs[seq & 1].data,
		       sizeof(h->user_blob));
		if (!raw_read_seqcount_latch_retry(&netoops_blob_seq, seq))
			return;
	}
	memset(h->user_blob, 0, sizeof(h->user_blob));
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
	       !test_bit(NETOOPS_TARGET_FAULTED, &nt->flags) &&
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
 * Where a packet to a target really leaves the machine.  A VLAN, a macvlan
 * or a bridge has no queue or NAPI of its own: it hands its packets to
 * netpoll on the device below, whose completions nobody reaps, and which
 * fails as netpoll does after a panic (see netoops_xmit()).  The panic
 * dump builds the frame for the target's device (its addresses and VLAN
 * tag) and gives it to the device below itself.  A bridge sends through
 * each port that is up and is a NIC (a device on a bus) or a VLAN, macvlan
 * or bond: as it floods a frame to an address it does not know, less the
 * taps and veths of guests and containers.  One VLAN tag at most.
 */
#define NETOOPS_PATHS		4
#define NETOOPS_STACK_DEPTH	4

struct netoops_path {
	struct net_device	*dev;
	__be16			vlan_proto;	/* 0: untagged */
	u16			vlan_id;
	bool			netpoll;	/* send with netpoll_send_skb() */
};

static bool netoops_dev_up(const struct net_device *dev)
{
	return netif_running(dev) && netif_carrier_ok(dev) &&
	       netif_device_present(dev);
}

static bool netoops_bridge_port(const struct net_device *dev)
{
	return dev->dev.parent || is_vlan_dev(dev) || netif_is_macvlan(dev);
}

/*
 * A bond or team sends through netpoll on its slaves, with waits a panic
 * must not make (see netoops_send_path()).
 */
static bool netoops_netpoll_only(const struct net_device *dev)
{
	return netif_is_bond_master(dev) || netif_is_team_master(dev);
}

/*
 * Fill @p (room for @n) with the devices below @dev that a packet to it
 * leaves through; returns how many.  The lower lists are RCU lists: the
 * code this NMI interrupted may have been changing one.
 */
static unsigned int netoops_resolve(struct net_device *dev, __be16 proto,
				    u16 vid, struct netoops_path *p,
				    unsigned int n, unsigned int depth)
{
	struct net_device *lower;
	struct list_head *iter;
	unsigned int got = 0;

	if (!n || depth > NETOOPS_STACK_DEPTH || !netoops_dev_up(dev))
		return 0;
	if (is_vlan_dev(dev)) {
		struct vlan_dev_priv *vlan = vlan_dev_priv(dev);

		if (proto)
			return 0;
		return netoops_resolve(vlan->real_dev, vlan->vlan_proto,
				       vlan->vlan_id, p, n, depth + 1);
	}
	if (netif_is_macvlan(dev))
		return netoops_resolve(macvlan_dev_real_dev(dev), proto, vid,
				       p, n, depth + 1);
	if (netif_is_bridge_master(dev)) {
		iter = &dev->adj_list.lower;
		while ((lower = netdev_next_lower_dev_rcu(dev, &iter)))
			if (netoops_bridge_port(lower))
				got += netoops_resolve(lower, proto, vid,
						       p + got, n - got,
						       depth + 1);
		return got;
	}
	p->dev = dev;
	p->vlan_proto = proto;
	p->vlan_id = vid;
	p->netpoll = false;
	return 1;
}

static unsigned int netoops_paths(struct netpoll_target *nt,
				  struct netoops_path *p)
{
	unsigned int n;

	rcu_read_lock();
	n = netoops_resolve(nt->np.dev, 0, 0, p, NETOOPS_PATHS, 0);
	rcu_read_unlock();
	/*
	 * Below a bond or a team, the frame goes to the target's device
	 * through netpoll, as before: their own transmit picks the slave.
	 */
	if (n && netoops_netpoll_only(p[0].dev)) {
		p->dev = nt->np.dev;
		p->vlan_proto = 0;
		p->netpoll = true;
		n = 1;
	}
	return n;
}

/*
 * The device's NAPI poll with a budget of 0 (transmit completions only), as
 * netpoll's poll_napi() runs it.  NAPI_STATE_NPSVC keeps off a NAPI that is
 * disabled (netpoll's rule).  A NAPI that this CPU was polling when the
 * panic came from inside it is left alone.
 *
 * A NAPI whose poll another CPU was in when the panic stopped it stays
 * owned by that CPU for good, and on most multi-queue NICs the transmit
 * completions of one queue are cleaned only there (vmxnet3, virtio-net's
 * TX NAPI): with @takeover (the pool ran dry for a millisecond), once that
 * CPU is known stopped (the panic took it offline), the dump polls it all
 * the same.  With a budget of 0 drivers skip the receive work, where a
 * poll spends nearly all its time; a CPU stopped inside the transmit
 * clean-up itself leaves its ring half way through a change, which this
 * poll may then repeat: the price of getting the dump out at all.
 */
static void netoops_poll_napi(struct net_device *dev, bool takeover)
{
	int cpu = smp_processor_id();
	struct napi_struct *napi;

	list_for_each_entry_rcu(napi, &dev->napi_list, dev_list) {
		int owner = cmpxchg(&napi->poll_owner, -1, cpu);

		if (owner != -1 &&
		    (!takeover || owner == cpu || cpu_online(owner)))
			continue;
		if (!test_and_set_bit(NAPI_STATE_NPSVC, &napi->state)) {
			napi->poll(napi, 0);
			clear_bit(NAPI_STATE_NPSVC, &napi->state);
		}
		if (owner == -1)	/* the poll's work before the next owner's */
			smp_store_release(&napi->poll_owner, -1);
	}
}

/*
 * The owner is set after the lock is taken and cleared before it is let
 * go: a CPU stopped in between holds it with no owner, so the lock is
 * tried as well (nothing else takes it after a panic).
 */
static bool netoops_txq_free(struct netdev_queue *txq)
{
	if (READ_ONCE(txq->xmit_lock_owner) != -1 ||
	    !spin_trylock(&txq->_xmit_lock))
		return false;
	spin_unlock(&txq->_xmit_lock);
	return true;
}

/*
 * Is a transmit lock of @dev held?  After a panic nothing else transmits:
 * it is held for good, by a CPU the panic stopped or by the code this NMI
 * interrupted.  Such a device is not polled (some drivers, tg3, bnx2 and
 * vmxnet3 among them, take it or a lock of their own under it in their
 * poll); netoops_xmit() keeps off that queue and uses the others.
 */
static bool netoops_dev_locked(struct net_device *dev)
{
	unsigned int i;

	for (i = 0; i < dev->num_tx_queues; i++)
		if (!netoops_txq_free(netdev_get_tx_queue(dev, i)))
			return true;
	return false;
}

/*
 * The driver's ndo_poll_controller runs only when it cannot wait: e1000's
 * and e1000e's call disable_hardirq() (on up to three MSI-X vectors),
 * which spins without a bound while any run of the handler is in progress
 * (a CPU stopped inside it, or the code this panic interrupted) and takes
 * the descriptor's lock, which a stopped CPU may hold.  netoops cannot
 * tell which interrupts a controller touches: it runs none unless no
 * interrupt of the machine is in a handler and no descriptor is locked.
 * After a panic that cannot change (this CPU has interrupts off, the
 * others are stopped), so it is checked once.  For a level-triggered line
 * (a PCI device without MSI) disable_hardirq() also waits, under the
 * IO-APIC's lock, for the line's Remote IRR to clear, which it never does
 * once the interrupt went to a CPU that will not acknowledge it: no
 * controller for a device without MSI or MSI-X.  e1000 cleans its ring
 * in its NAPI poll, which is enough.
 */
static int netoops_irqs_state = -1;

static bool netoops_irqs_quiet(void)
{
	unsigned int irq;

	if (netoops_irqs_state >= 0)
		return netoops_irqs_state;
	netoops_irqs_state = 1;
	for (irq = 0; irq < nr_irqs; irq++) {
		struct irq_data *d = irq_get_irq_data(irq);

		if (d && (irqd_irq_inprogress(d) ||
			  raw_spin_is_locked(&irq_data_to_desc(d)->lock))) {
			netoops_irqs_state = 0;
			break;
		}
	}
	return netoops_irqs_state;
}

/*
 * netpoll_poll_dev() without what a panic must not do: its semaphore
 * (down_trylock() spins on a lock a stopped CPU may hold; a count of 0
 * says a poll was under way there) and its freeing of the CPU's completion
 * queue (the allocator, from an NMI).  Pool skbs need neither: netoops
 * holds a reference to each.
 */
static void netoops_poll_controller(struct net_device *dev)
{
	const struct net_device_ops *ops = dev->netdev_ops;
	struct netpoll_info *ni = rcu_dereference_bh(dev->npinfo);

	struct device *parent = dev->dev.parent;
	struct pci_dev *pdev;

	if (!ops->ndo_poll_controller || !ni || !parent ||
	    !dev_is_pci(parent) || READ_ONCE(ni->dev_lock.count) == 0)
		return;
	pdev = to_pci_dev(parent);
	if ((!pdev->msi_enabled && !pdev->msix_enabled) ||
	    !netoops_irqs_quiet())
		return;
	ops->ndo_poll_controller(dev);
}

/*
 * Reap the transmit completions of every device the dump sends through
 * (below a stacked target, the devices it leaves through).  A fault in a
 * driver's poll is charged to the target whose device it is.
 */
static void netoops_reap(bool controller)
{
	struct netpoll_target *nt, *sending = this_cpu_read(netoops_sending);
	struct netoops_path paths[NETOOPS_PATHS];
	unsigned int i, n;

	netpoll_targets_for_each(nt, &netoops_targets) {
		if (!netoops_target_usable(nt))
			continue;
		netoops_set_sending(nt);
		n = netoops_paths(nt, paths);
		for (i = 0; i < n; i++) {
			struct net_device *dev = paths[i].dev;

			if (netoops_dev_locked(dev))
				continue;
			atomic_inc(&netoops_pool_polls);
			if (controller)
				netoops_poll_controller(dev);
			netoops_poll_napi(dev, controller);
		}
	}
	this_cpu_write(netoops_sending, sending);
}

/*
 * Reap completions until @ready() says yes: every 10 us, with the NAPI poll
 * alone for the first millisecond (NICs that clean their ring in NAPI
 * need no more), then with the driver's ndo_poll_controller as well
 * (QEMU's e1000e in MSI-X mode cleans its ring only in the transmit
 * vector's handler), for NETOOPS_REAP_US at most.  With *@dry set (a wait
 * for the same thing ran out before) it reaps once and does not wait; it
 * sets or clears *@dry.
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
		    !test_bit(NETOOPS_TARGET_STALLED, &other->flags))
			return false;
	return true;
}

/* Is a queue of @arg (a device) free of locks and awake? */
static bool netoops_queue_ready(void *arg)
{
	struct net_device *dev = arg;
	unsigned int i;

	for (i = 0; i < dev->real_num_tx_queues; i++) {
		struct netdev_queue *txq = netdev_get_tx_queue(dev, i);

		if (netoops_txq_free(txq) && !netif_xmit_frozen_or_stopped(txq))
			return true;
	}
	return false;
}

static bool netoops_queue_unlocked(struct net_device *dev)
{
	unsigned int i;

	for (i = 0; i < dev->real_num_tx_queues; i++)
		if (netoops_txq_free(netdev_get_tx_queue(dev, i)))
			return true;
	return false;
}

/*
 * Can @dev take a packet of @nt at once?  Only a queue whose transmit lock
 * is free counts (held after a panic, it is held for good); a stopped one
 * (the ring is nearly full) is reaped until it wakes.  Nor when the target
 * holds its share of the pool, other targets need the rest, and reaping
 * frees none of it.
 */
static const char *netoops_dev_ready(struct netpoll_target *nt,
				     struct net_device *dev)
{
	bool dry = false;

	if (!netoops_queue_unlocked(dev))
		return "every transmit queue is locked, for good";
	if (!netoops_reap_until(netoops_queue_ready, dev, &dry))
		return "its transmit queues stayed stopped while it was reaped";
	if (!netoops_lone_target(nt) &&
	    !netoops_reap_until(netoops_share_ready, nt, &dry))
		return "it keeps the pool skbs it was given";
	return NULL;
}

static netdev_tx_t netoops_xmit_queue(struct net_device *dev,
				      struct netdev_queue *txq, unsigned int q,
				      struct sk_buff *skb)
{
	netdev_tx_t rc = NETDEV_TX_BUSY;

	/* __netif_tx_trylock() and __netif_tx_unlock(), spelt out for sparse */
	if (!spin_trylock(&txq->_xmit_lock))
		return rc;
	WRITE_ONCE(txq->xmit_lock_owner, smp_processor_id());
	if (!netif_xmit_frozen_or_stopped(txq)) {
		skb_set_queue_mapping(skb, q);
		rc = netdev_start_xmit(skb, dev, txq, false);
	}
	WRITE_ONCE(txq->xmit_lock_owner, -1);
	spin_unlock(&txq->_xmit_lock);
	return rc;
}

/* How many pool skbs has @dev not let go of on its queue @q? */
static unsigned int netoops_queue_held(const struct net_device *dev,
				       unsigned int q)
{
	unsigned int i, held = 0;

	for (i = 0; i < NETOOPS_SKBS; i++) {
		const struct sk_buff *skb = netoops_skbs[i];

		if (netoops_skb_held(skb) && skb->dev == dev &&
		    skb_get_queue_mapping(skb) == q)
			held++;
	}
	return held;
}

/*
 * Hand @skb to @dev on a queue whose transmit lock is free and which is
 * awake: what netpoll_send_skb() does, less what defeats it after a panic.
 * netpoll parks the packet for a worker that never runs when this CPU owns
 * a NAPI of the device (a panic raised inside the device's own receive
 * poll: GRO, IP, netfilter, a packet handler), and every later one behind
 * it; the interrupted poll never resumes, so the transmit routine is free
 * to run.  It waits a jiffy for the one queue it picked, where another
 * queue may be free.
 *
 * Of the usable queues it takes the one holding the fewest pool skbs
 * (this CPU's first when they tie): a queue whose completions are cleaned
 * only in a NAPI poll the panic interrupted on this CPU never gives its
 * skbs back, and the pool then goes to the others.  Returns whether the
 * driver took the packet.
 */
static bool netoops_xmit(struct net_device *dev, struct sk_buff *skb)
{
	unsigned int n = dev->real_num_tx_queues;
	unsigned int i, q, best = n, best_held = UINT_MAX;
	struct netdev_queue *txq;

	for (i = 0; i < n; i++) {
		unsigned int held;

		q = (raw_smp_processor_id() + i) % n;
		txq = netdev_get_tx_queue(dev, q);
		if (netif_xmit_frozen_or_stopped(txq) || !netoops_txq_free(txq))
			continue;
		held = netoops_queue_held(dev, q);
		if (held < best_held) {
			best = q;
			best_held = held;
		}
	}
	if (best == n)
		return false;
	txq = netdev_get_tx_queue(dev, best);
	return dev_xmit_complete(netoops_xmit_queue(dev, txq, best, skb));
}

/* Build the frame netpoll_send_udp() would send, in @skb, for @path. */
static void netoops_build(struct netpoll_target *nt,
			  const struct netoops_path *path, struct sk_buff *skb,
			  const void *msg, int len)
{
	struct netpoll *np = &nt->np;
	int udp_len = len + sizeof(struct udphdr);
	static atomic_t ip_ident;
	struct udphdr *udph;
	struct ethhdr *eth;
	__be16 proto;

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
		int ip_len = udp_len + sizeof(struct iphdr);
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

	proto = skb->protocol;
	if (path->vlan_proto &&
	    vlan_hw_offload_capable(path->dev->features, path->vlan_proto)) {
		__vlan_hwaccel_put_tag(skb, path->vlan_proto, path->vlan_id);
	} else if (path->vlan_proto) {
		struct vlan_hdr *vhdr = skb_push(skb, VLAN_HLEN);

		vhdr->h_vlan_TCI = htons(path->vlan_id);
		vhdr->h_vlan_encapsulated_proto = proto;
		proto = path->vlan_proto;
		skb->protocol = proto;
	}
	eth = skb_push(skb, ETH_HLEN);
	skb_reset_mac_header(skb);
	eth->h_proto = proto;
	ether_addr_copy(eth->h_source, np->dev->dev_addr);
	ether_addr_copy(eth->h_dest, np->remote_mac);
	skb->dev = path->dev;
}

/*
 * Send @msg to @nt through @path from a pool skb; NULL, or why the device
 * cannot take it (the caller counts that).
 */
static const char *netoops_send_path(struct netpoll_target *nt,
				     const struct netoops_path *path,
				     const void *msg, int len)
{
	struct net_device *dev = path->dev;
	int ip_len = len + sizeof(struct udphdr) +
		     (nt->np.ipv6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	int reserve = max_t(int, LL_RESERVED_SPACE(nt->np.dev),
			    LL_RESERVED_SPACE(dev) +
			    (path->vlan_proto ? VLAN_HLEN : 0));
	struct netoops_pool_wait w = { .nt = nt };
	const char *why;
	bool dry = false;

	if (reserve + ip_len + dev->needed_tailroom > NETOOPS_SKB_BYTES) {
		atomic_inc(&netoops_skb_unfit);
		return NULL;
	}
	why = netoops_dev_ready(nt, dev);
	if (why)
		return why;
	if (!netoops_reap_until(netoops_pool_ready, &w, &netoops_pool_dry)) {
		atomic_inc(&netoops_skb_drops);
		return NULL;
	}
	skb_reserve(w.skb, reserve + ip_len - len);
	netoops_build(nt, path, w.skb, msg, len);

	skb_get(w.skb);		/* ours: see netoops_pool_find() */
	atomic_inc(&netoops_panic_packets);
	if (path->netpoll) {
		netpoll_send_skb(&nt->np, w.skb);
		return NULL;
	}
	/* A queue that filled up under it is reaped once, within the bound */
	if (netoops_xmit(dev, w.skb) ||
	    (netoops_reap_until(netoops_queue_ready, dev, &dry) &&
	     netoops_xmit(dev, w.skb)))
		return NULL;
	/* The driver refused it: only our reference is left. */
	atomic_dec(&netoops_panic_packets);
	kfree_skb(w.skb);
	return "its driver refused the packet";
}

/*
 * The devices below a target that the panic dump gave up on, by target:
 * only the panic's CPU writes it.
 */
#define NETOOPS_STALLED_MAX	16

static struct {
	struct netpoll_target	*nt;
	struct net_device	*dev;
} netoops_stalled[NETOOPS_STALLED_MAX];
static unsigned int netoops_nr_stalled;

static bool netoops_path_stalled(struct netpoll_target *nt,
				 struct net_device *dev)
{
	unsigned int i;

	for (i = 0; i < netoops_nr_stalled; i++)
		if (netoops_stalled[i].nt == nt && netoops_stalled[i].dev == dev)
			return true;
	return false;
}

static void netoops_path_stall(struct netpoll_target *nt,
			       struct net_device *dev, const char *why)
{
	pr_emerg("panic dump: %s left alone for %s: %s\n", dev->name,
		 nt->np.dev_name, why);
	if (netoops_nr_stalled < NETOOPS_STALLED_MAX) {
		netoops_stalled[netoops_nr_stalled].nt = nt;
		netoops_stalled[netoops_nr_stalled].dev = dev;
		netoops_nr_stalled++;
	}
}

/*
 * Send @msg to @nt through every device below it (one for a NIC, a VLAN or
 * a macvlan).  A device that cannot transmit, or keeps what it was given
 * while other targets need the pool, is left alone for the rest of the
 * panic: the target, once none of its devices is left.
 */
static void netoops_send_pool(struct netpoll_target *nt, const void *msg,
			      int len)
{
	struct netoops_path paths[NETOOPS_PATHS];
	unsigned int i, n = netoops_paths(nt, paths);
	const char *why;
	bool any = false;

	if (test_bit(NETOOPS_TARGET_STALLED, &nt->flags))
		n = 0;
	for (i = 0; i < n; i++) {
		if (netoops_path_stalled(nt, paths[i].dev))
			continue;
		why = netoops_send_path(nt, &paths[i], msg, len);
		if (why)
			netoops_path_stall(nt, paths[i].dev, why);
		else
			any = true;
	}
	if (!any) {
		atomic_inc(&netoops_stalled_skips);
		set_bit(NETOOPS_TARGET_STALLED, &nt->flags);
	}
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
		netoops_set_sending(nt);
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

static u16 netoops_next_id(void)
{
	return (u16)atomic_inc_return(&netoops_dump_id);
}

/* Fill in @buf for dump @id, of the whole log, and send it. */
static void netoops_send_dump(struct netoops_buf *buf, u16 id,
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
	h->dump_id = cpu_to_le16(id);
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

/* Was this CPU sending the panic dump (an oops inside it, say)? */
static bool netoops_in_panic_dump(void)
{
	return READ_ONCE(netoops_panic_cpu) == raw_smp_processor_id();
}

/*
 * An oops on a CPU that was transmitting to a target, in the context that
 * was sending: that send faulted.  Leave the target alone from now on
 * (until it is enabled again); its device may be wedged.  A panic without
 * an oops (an NMI, say) that interrupted a send says nothing about the
 * target, nor does an oops in an NMI that interrupted it.
 */
static void netoops_check_faulted(const struct netoops_detail *detail)
{
	struct netpoll_target *nt = this_cpu_read(netoops_sending);

	if (!nt || !detail->regs ||
	    this_cpu_read(netoops_sending_nmi) != !!in_nmi())
		return;
	this_cpu_write(netoops_sending, NULL);
	set_bit(NETOOPS_TARGET_FAULTED, &nt->flags);
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
				set_bit(NETOOPS_TARGET_FAULTED, &other->flags);
	}
}

/* A target enabled again (from configfs) is given another chance. */
static void netoops_target_enabled(struct netpoll_target *nt)
{
	clear_bit(NETOOPS_TARGET_FAULTED, &nt->flags);
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
	/*
	 * The retry sends what the panic was about, not the driver's fault,
	 * under the same dump id: the collector joins it with what the first
	 * try got out.
	 */
	if (!retry) {
		netoops_panic_regs = detail->regs;
		netoops_panic_id = netoops_next_id();
	}
	WRITE_ONCE(netoops_panic_cpu, raw_smp_processor_id());
	/*
	 * The dump that faulted holds the targets lock for good: the retry
	 * walks the list without it.
	 */
	netoops_send_dump(&netoops_panic, netoops_panic_id, NETOOPS_PANIC,
			  netoops_panic_regs, retry);
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
		netoops_send_dump(&netoops_live, netoops_next_id(),
				  detail->kind, detail->regs, false);
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
