// SPDX-License-Identifier: GPL-2.0
/*
 * netoops: send the whole kernel log, the registers of the fault and a few
 * machine facts over UDP when the kernel oopses or panics, or when a soft
 * dump is asked for (sysrq 'y').
 *
 * Targets are netpoll targets (configfs /sys/kernel/config/netoops/ or the
 * netoops= parameter).  The packet format is in netoops_wire.h.  Everything
 * the dump path needs is allocated at load time: it takes no sleeping lock,
 * allocates nothing and runs with interrupts off.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/delay.h>
#include <linux/kmsg_dump.h>
#include <linux/kobject.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/netdevice.h>
#include <linux/netpoll.h>
#include <linux/nmi.h>
#include <linux/random.h>
#include <linux/seqlock.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/utsname.h>
#include <linux/vmalloc.h>
#include <asm/kexec.h>
#include <asm/processor.h>

#include "netpoll_targets.h"
#include "netoops_wire.h"

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

static unsigned int pace_us = 100;
module_param(pace_us, uint, 0600);
MODULE_PARM_DESC(pace_us,
		 "pause between packets, in microseconds, so that a slow NIC drains its ring (default 100)");

static struct netpoll_targets netoops_targets;

/* Everything below is only touched by the one dump that holds netoops_busy. */
static unsigned long netoops_busy;
static char *netoops_log;
static struct netoops_msg netoops_msg;
static atomic_t netoops_dump_id;

static u32 netoops_boot_id;
static DEFINE_SEQLOCK(netoops_blob_lock);
static char netoops_blob[NETOOPS_BLOB_BYTES];
static size_t netoops_blob_len;

static struct kobject *netoops_kobj;

static void netoops_fill_arch(struct netoops_arch_data *arch,
			      struct pt_regs *regs)
{
	struct cpuinfo_x86 *c = &cpu_data(raw_smp_processor_id());

	arch->x86_vendor = c->x86_vendor;
	arch->x86_family = c->x86;
	arch->x86_model = c->x86_model;
	arch->x86_stepping = c->x86_stepping;
	if (regs)
		memcpy(&arch->regs, regs, sizeof(arch->regs));
	else
		crash_setup_regs(&arch->regs, NULL);
}

static void netoops_fill_blob(struct netoops_msg_header *h)
{
	unsigned int seq, tries = 0;

	/* A writer that was stopped mid-update must not hold up the dump. */
	do {
		seq = read_seqbegin(&netoops_blob_lock);
		memcpy(h->user_blob, netoops_blob, sizeof(h->user_blob));
	} while (read_seqretry(&netoops_blob_lock, seq) && ++tries < 3);
}

/* Send the current netoops_msg to every enabled target that is up. */
static void netoops_send_msg(void)
{
	struct netpoll_target *nt;

	netpoll_targets_for_each(nt, &netoops_targets) {
		struct net_device *dev = nt->np.dev;

		if (!netpoll_target_enabled(nt) || !dev ||
		    !netif_running(dev) || !netif_carrier_ok(dev))
			continue;
		netpoll_send_udp(&nt->np, (const char *)&netoops_msg,
				 sizeof(netoops_msg));
	}
}

/*
 * Send the current netoops_msg with interrupts off (netpoll needs them off)
 * and the targets lock held, waiting for the lock a bounded time.  On a
 * panic the other CPUs are stopped and one of them may hold the lock for
 * good: the list only changes in process context, so the dump then walks it
 * without the lock, and stops trying to take it.  A live system is better
 * left alone: the dump gives up.
 */
static bool netoops_send_chunk(enum kmsg_dump_reason reason, bool *lockless)
{
	unsigned long flags;
	bool sent = true;
	unsigned int us;

	local_irq_save(flags);
	for (us = 0; !*lockless && us < NETOOPS_LOCK_WAIT_US; us++) {
		if (spin_trylock(&netoops_targets.lock)) {
			netoops_send_msg();
			spin_unlock(&netoops_targets.lock);
			goto out;
		}
		udelay(1);
	}
	if (reason == KMSG_DUMP_PANIC) {
		*lockless = true;
		netoops_send_msg();
	} else {
		sent = false;
	}
out:
	local_irq_restore(flags);
	return sent;
}

static void netoops_send_log(size_t len, enum kmsg_dump_reason reason)
{
	struct netoops_msg_header *h = &netoops_msg.header;
	u32 count = max_t(u32, DIV_ROUND_UP(len, NETOOPS_DATA_BYTES), 1);
	bool lockless = false;
	u32 copy, no;

	h->packet_count = cpu_to_le32(count);
	for (copy = 0; copy < NETOOPS_RETRANSMIT_COUNT; copy++) {
		/* Newest chunk first: packet 0 ends with the last line. */
		for (no = 0; no < count; no++) {
			size_t start = (size_t)(count - 1 - no) * NETOOPS_DATA_BYTES;
			size_t n = min_t(size_t, len - min(len, start),
					 NETOOPS_DATA_BYTES);

			h->packet_no = cpu_to_le32(no);
			memcpy(netoops_msg.data, netoops_log + start, n);
			memset(netoops_msg.data + n, 0, NETOOPS_DATA_BYTES - n);
			if (!netoops_send_chunk(reason, &lockless))
				return;
			/*
			 * netpoll queues a packet for a workqueue, which never
			 * runs after a panic, when the device's queue stays
			 * stopped for a jiffy, and every later packet behind
			 * it: give the device time to drain.
			 */
			udelay(READ_ONCE(pace_us));
			touch_nmi_watchdog();
		}
	}
}

static void netoops_dump(struct kmsg_dumper *dumper,
			 const struct kmsg_dump_detail *detail)
{
	struct netoops_msg_header *h = &netoops_msg.header;
	enum kmsg_dump_reason reason = detail->reason;
	struct kmsg_dump_iter iter;
	size_t len = 0;

	if (reason != KMSG_DUMP_OOPS && reason != KMSG_DUMP_PANIC &&
	    reason != KMSG_DUMP_SOFT)
		return;
	/*
	 * An oops in interrupt context always ends in a panic, whose dump
	 * carries the same log and the same registers: send that one only,
	 * rather than load the device with a copy just before the panic.
	 */
	if (reason == KMSG_DUMP_OOPS && in_interrupt())
		return;
	/* One dump at a time; a fault while dumping must not recurse. */
	if (test_and_set_bit(0, &netoops_busy))
		return;

	kmsg_dump_rewind(&iter);
	kmsg_dump_get_buffer(&iter, false, netoops_log, log_bytes, &len);

	memset(h, 0, sizeof(*h));
	h->version = cpu_to_le16(NETOOPS_VERSION);
	h->dump_id = cpu_to_le16((u16)atomic_inc_return(&netoops_dump_id));
	h->data_offset = cpu_to_le16(offsetof(struct netoops_msg, data));
	h->arch = cpu_to_le16(NETOOPS_ARCH_X86);
	h->arch_offset = cpu_to_le16(offsetof(struct netoops_msg, arch_data));
	h->type = cpu_to_le16(reason == KMSG_DUMP_SOFT ?
			      NETOOPS_TYPE_PRINTK_BUFFER_SOFT :
			      NETOOPS_TYPE_PRINTK_BUFFER);
	h->boot_id = cpu_to_le32(READ_ONCE(netoops_boot_id));
	strscpy_pad(h->kernel_version, init_utsname()->release,
		    sizeof(h->kernel_version));
	netoops_fill_blob(h);
	netoops_fill_arch(&netoops_msg.arch_data, detail->regs);

	netoops_send_log(len, reason);

	/* The machine goes on after an oops or a soft dump. */
	clear_bit(0, &netoops_busy);
}

static struct kmsg_dumper netoops_dumper = {
	.dump_detail	= netoops_dump,
	.max_reason	= KMSG_DUMP_OOPS,
	.soft_dump	= true,
};

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
	unsigned int seq;
	size_t len;

	do {
		seq = read_seqbegin(&netoops_blob_lock);
		len = netoops_blob_len;
		memcpy(buf, netoops_blob, len);
	} while (read_seqretry(&netoops_blob_lock, seq));
	return len;
}

static ssize_t netoops_user_blob_store(struct kobject *kobj,
				       struct kobj_attribute *attr,
				       const char *buf, size_t count)
{
	unsigned long flags;

	if (count > NETOOPS_BLOB_BYTES)
		return -EINVAL;
	write_seqlock_irqsave(&netoops_blob_lock, flags);
	memset(netoops_blob, 0, sizeof(netoops_blob));
	memcpy(netoops_blob, buf, count);
	netoops_blob_len = count;
	write_sequnlock_irqrestore(&netoops_blob_lock, flags);
	return count;
}

static struct kobj_attribute netoops_boot_id_attr =
	__ATTR(netoops_boot_id, 0644, netoops_boot_id_show,
	       netoops_boot_id_store);
static struct kobj_attribute netoops_user_blob_attr =
	__ATTR(netoops_user_blob, 0644, netoops_user_blob_show,
	       netoops_user_blob_store);

static struct attribute *netoops_attrs[] = {
	&netoops_boot_id_attr.attr,
	&netoops_user_blob_attr.attr,
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
	netoops_log = vmalloc(log_bytes);
	if (!netoops_log)
		return -ENOMEM;
	atomic_set(&netoops_dump_id, get_random_u16());

	netoops_kobj = kobject_create_and_add("netoops", kernel_kobj);
	if (!netoops_kobj) {
		err = -ENOMEM;
		goto err_free_log;
	}
	err = sysfs_create_group(netoops_kobj, &netoops_attr_group);
	if (err)
		goto err_put_kobj;

	netoops_targets.default_local_port = NETOOPS_PORT;
	netoops_targets.default_remote_port = NETOOPS_PORT;
	err = register_netpoll_targets(&netoops_targets, "netoops",
				       netoops_param);
	if (err)
		goto err_put_kobj;

	err = kmsg_dump_register(&netoops_dumper);
	if (err)
		goto err_unregister_targets;
	return 0;

err_unregister_targets:
	unregister_netpoll_targets(&netoops_targets);
err_put_kobj:
	kobject_put(netoops_kobj);
err_free_log:
	vfree(netoops_log);
	return err;
}

static void __exit netoops_exit(void)
{
	kmsg_dump_unregister(&netoops_dumper);
	unregister_netpoll_targets(&netoops_targets);
	kobject_put(netoops_kobj);
	vfree(netoops_log);
}

module_init(netoops_init);
module_exit(netoops_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Send the kernel log and crash facts over UDP on oops and panic");
