// SPDX-License-Identifier: GPL-2.0
/*
 * Test-only module: an Ethernet device, ntofault0, that drops what it is
 * given to send, and faults (a NULL write) in its transmit routine when
 * netpoll calls it, once /sys/module/nto_faultdev/parameters/fault is set:
 * a NIC driver that crashes under the netoops dump.  With the busy
 * parameter set instead it tells netpoll that its ring is full, for good:
 * a device whose transmit lock a stopped CPU holds, as netpoll sees it.
 * With the hold parameter set it takes what netpoll gives it and never lets
 * go: a veth, whose peer's backlog nothing processes after a panic, or a
 * NIC whose completions never come.  Writing 1 to the lock parameter
 * starts a thread on CPU 1 that takes the device's transmit lock and
 * spins holding it (parameter locked reads Y then): a CPU that a panic
 * stops inside the transmit path.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/etherdevice.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>

static bool fault;
module_param(fault, bool, 0644);
MODULE_PARM_DESC(fault, "fault in the transmit routine (default off)");

static bool busy;
module_param(busy, bool, 0644);
MODULE_PARM_DESC(busy, "refuse every packet from netpoll (default off)");

static bool hold;
module_param(hold, bool, 0644);
MODULE_PARM_DESC(hold, "keep every packet from netpoll, for good (default off)");

static bool locked;
module_param(locked, bool, 0444);
MODULE_PARM_DESC(locked, "CPU 1 holds the transmit lock (read only)");

static struct net_device *nto_faultdev;

static int nto_faultdev_locker(void *unused)
{
	struct netdev_queue *txq = netdev_get_tx_queue(nto_faultdev, 0);

	local_bh_disable();
	__netif_tx_lock(txq, smp_processor_id());
	WRITE_ONCE(locked, true);
	for (;;)
		cpu_relax();
	return 0;
}

static int nto_faultdev_lock_set(const char *val, const struct kernel_param *kp)
{
	struct task_struct *t;
	bool on;

	if (kstrtobool(val, &on))
		return -EINVAL;
	if (!on || READ_ONCE(locked))
		return 0;
	t = kthread_create_on_cpu(nto_faultdev_locker, NULL, 1, "nto_locker/%u");
	if (IS_ERR(t))
		return PTR_ERR(t);
	wake_up_process(t);
	return 0;
}

static const struct kernel_param_ops nto_faultdev_lock_ops = {
	.set	= nto_faultdev_lock_set,
};

module_param_cb(lock, &nto_faultdev_lock_ops, NULL, 0200);
MODULE_PARM_DESC(lock, "1: CPU 1 takes the transmit lock and spins holding it");
static struct sk_buff_head nto_faultdev_held;

/* Kept out of line so that the oops has a named frame of its own. */
static noinline int *nto_faultdev_pointer(unsigned long addr)
{
	return (int *)addr;
}

static noinline void nto_faultdev_crash(void)
{
	int *p = nto_faultdev_pointer(0);

	WRITE_ONCE(*p, 0x6e7466);
}

static netdev_tx_t nto_faultdev_xmit(struct sk_buff *skb,
				     struct net_device *dev)
{
	/* Only netpoll transmits with interrupts off: the stack's own
	 * packets (IPv6 neighbour discovery, say) never fault.
	 */
	if (READ_ONCE(fault) && irqs_disabled())
		nto_faultdev_crash();
	if (READ_ONCE(busy) && irqs_disabled())
		return NETDEV_TX_BUSY;
	dev->stats.tx_packets++;
	dev->stats.tx_bytes += skb->len;
	if (READ_ONCE(hold) && irqs_disabled())
		skb_queue_tail(&nto_faultdev_held, skb);
	else
		dev_kfree_skb_any(skb);
	return NETDEV_TX_OK;
}

static int nto_faultdev_open(struct net_device *dev)
{
	netif_carrier_on(dev);
	netif_start_queue(dev);
	return 0;
}

static int nto_faultdev_stop(struct net_device *dev)
{
	netif_stop_queue(dev);
	netif_carrier_off(dev);
	return 0;
}

static const struct net_device_ops nto_faultdev_ops = {
	.ndo_open	= nto_faultdev_open,
	.ndo_stop	= nto_faultdev_stop,
	.ndo_start_xmit	= nto_faultdev_xmit,
	.ndo_set_mac_address = eth_mac_addr,
};

static int __init nto_faultdev_init(void)
{
	int err;

	skb_queue_head_init(&nto_faultdev_held);
	nto_faultdev = alloc_etherdev(0);
	if (!nto_faultdev)
		return -ENOMEM;
	strscpy(nto_faultdev->name, "ntofault0", IFNAMSIZ);
	nto_faultdev->netdev_ops = &nto_faultdev_ops;
	eth_hw_addr_random(nto_faultdev);
	/* The pointer the tests compare with the oops's RIP */
	pr_info("nto_faultdev_crash=%px\n", nto_faultdev_crash);
	err = register_netdev(nto_faultdev);
	if (err)
		free_netdev(nto_faultdev);
	return err;
}

static void __exit nto_faultdev_exit(void)
{
	unregister_netdev(nto_faultdev);
	free_netdev(nto_faultdev);
	skb_queue_purge(&nto_faultdev_held);
}

module_init(nto_faultdev_init);
module_exit(nto_faultdev_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("netoops test device whose transmit routine faults on request");
