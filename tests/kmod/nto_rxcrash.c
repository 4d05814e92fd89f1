// SPDX-License-Identifier: GPL-2.0
/*
 * Test-only module: a packet handler (dev_add_pack) that crashes the
 * kernel from inside the receive path, in the NIC's NAPI poll, when a UDP
 * datagram to port 7001 that starts with "nto-rx-crash" arrives:
 *
 *   insmod nto_rxcrash.ko mode=oops    NULL dereference: "Fatal exception
 *                                      in interrupt"
 *   insmod nto_rxcrash.ko mode=lockup  spin there (a soft lockup, which
 *                                      panics with softlockup_panic=1)
 *   insmod nto_rxcrash.ko mode=spin    spin there for good, with interrupts
 *                                      off: the CPU stays inside the poll
 *                                      until a panic on another CPU stops
 *                                      it; /proc/nto_rxspin reads 1 then
 *   insmod nto_rxcrash.ko mode=irqspin irq=N
 *                                      a handler shared on the NIC's
 *                                      interrupt line N spins, from the
 *                                      next interrupt after the datagram
 *                                      on: the CPU stays inside the NIC's
 *                                      interrupt handler (/proc/nto_rxspin
 *                                      reads 1 then)
 *
 * A real receive-path fault (GRO, IP, netfilter, XDP) reaches the dump in
 * the same place: in the softirq, with the NIC's NAPI owned by this CPU.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/interrupt.h>
#include <linux/ip.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <linux/skbuff.h>
#include <linux/string.h>
#include <linux/udp.h>

#define NTO_RX_PORT	7001
#define NTO_RX_MAGIC	"nto-rx-crash"

static char *mode = "oops";
module_param(mode, charp, 0400);
MODULE_PARM_DESC(mode, "oops, lockup, spin or irqspin");

static int irq = -1;
module_param(irq, int, 0400);
MODULE_PARM_DESC(irq, "mode=irqspin: the NIC's (shareable) interrupt line");

static int nto_rx_spinning;
static bool nto_rx_irq_armed;

/* Kept out of line so that the oops has a named frame of its own. */
static noinline int *nto_rx_pointer(unsigned long addr)
{
	return (int *)addr;
}

static noinline void nto_rx_null_deref(void)
{
	int *p = nto_rx_pointer(0);

	WRITE_ONCE(*p, 0x6e7472);
}

static noinline void nto_rx_spin(bool irqs_off)
{
	if (irqs_off)
		local_irq_disable();
	WRITE_ONCE(nto_rx_spinning, 1);
	for (;;)
		cpu_relax();
}

static bool nto_rx_marked(struct sk_buff *skb)
{
	const struct iphdr *iph;
	const struct udphdr *uh;
	char magic[sizeof(NTO_RX_MAGIC) - 1];
	unsigned int off;

	if (!pskb_may_pull(skb, sizeof(*iph)))
		return false;
	iph = ip_hdr(skb);
	if (iph->protocol != IPPROTO_UDP || iph->ihl < 5)
		return false;
	off = iph->ihl * 4;
	if (!pskb_may_pull(skb, off + sizeof(*uh)))
		return false;
	uh = (const struct udphdr *)(skb->data + off);
	if (uh->dest != htons(NTO_RX_PORT))
		return false;
	off += sizeof(*uh);
	return !skb_copy_bits(skb, off, magic, sizeof(magic)) &&
	       !memcmp(magic, NTO_RX_MAGIC, sizeof(magic));
}

static int nto_rx_rcv(struct sk_buff *skb, struct net_device *dev,
		      struct packet_type *pt, struct net_device *orig_dev)
{
	skb = skb_share_check(skb, GFP_ATOMIC);
	if (!skb)
		return NET_RX_DROP;
	if (nto_rx_marked(skb)) {
		pr_emerg("marked datagram on %s (cpu %d, in_softirq %d): %s\n",
			 dev->name, raw_smp_processor_id(),
			 !!in_softirq(), mode);
		if (!strcmp(mode, "oops"))
			nto_rx_null_deref();
		else if (!strcmp(mode, "lockup"))
			nto_rx_spin(false);
		else if (!strcmp(mode, "spin"))
			nto_rx_spin(true);
		else
			WRITE_ONCE(nto_rx_irq_armed, true);
	}
	kfree_skb(skb);
	return NET_RX_SUCCESS;
}

static struct packet_type nto_rx_pt = {
	.type	= cpu_to_be16(ETH_P_IP),
	.func	= nto_rx_rcv,
};

/* Called for every interrupt on the line, before or after the NIC's own */
static irqreturn_t nto_rx_irq(int line, void *cookie)
{
	if (READ_ONCE(nto_rx_irq_armed))
		nto_rx_spin(false);
	return IRQ_NONE;
}

static int nto_rx_show(struct seq_file *m, void *v)
{
	seq_printf(m, "%d\n", READ_ONCE(nto_rx_spinning));
	return 0;
}

static int __init nto_rx_init(void)
{
	int err;

	if (strcmp(mode, "oops") && strcmp(mode, "lockup") &&
	    strcmp(mode, "spin") && strcmp(mode, "irqspin"))
		return -EINVAL;
	if (!strcmp(mode, "irqspin")) {
		if (irq < 0)
			return -EINVAL;
		err = request_irq(irq, nto_rx_irq, IRQF_SHARED, "nto_irqspin",
				  &nto_rx_pt);
		if (err)
			return err;
	}
	if (!proc_create_single("nto_rxspin", 0444, NULL, nto_rx_show)) {
		if (irq >= 0 && !strcmp(mode, "irqspin"))
			free_irq(irq, &nto_rx_pt);
		return -ENOMEM;
	}
	pr_info("mode=%s nto_rx_null_deref=%px\n", mode, nto_rx_null_deref);
	dev_add_pack(&nto_rx_pt);
	return 0;
}

static void __exit nto_rx_exit(void)
{
	dev_remove_pack(&nto_rx_pt);
	remove_proc_entry("nto_rxspin", NULL);
	if (!strcmp(mode, "irqspin"))
		free_irq(irq, &nto_rx_pt);
}

module_init(nto_rx_init);
module_exit(nto_rx_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("netoops test: a packet handler that crashes the receive path");
