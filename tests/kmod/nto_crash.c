// SPDX-License-Identifier: GPL-2.0
/*
 * Test-only module: crashes the kernel in a chosen way when loaded, so that
 * the guest tests can produce real oopses, warnings and panics.
 *
 *   insmod nto_crash.ko mode=null    NULL dereference in process context
 *   insmod nto_crash.ko mode=timer   NULL dereference in a timer (softirq)
 *   insmod nto_crash.ko mode=gpf     general protection fault
 *   insmod nto_crash.ko mode=bug     BUG()
 *   insmod nto_crash.ko mode=warn    WARN(), then the module stays loaded
 *   insmod nto_crash.ko mode=lockup  spin with preemption off (soft lockup)
 *   insmod nto_crash.ko mode=oops2   CPUs 0 and 1 oops at the same moment,
 *                                    each in a function of its own
 *   insmod nto_crash.ko mode=hang    insmod blocks in D state for good
 *   insmod nto_crash.ko mode=oom     take every page and slab object that
 *                                    GFP_ATOMIC can get, then panic
 *   insmod nto_crash.ko mode=trigger stay loaded; every write to
 *                                    /proc/nto_oops oopses the writer
 *   insmod nto_crash.ko mode=nested  NULL dereference whose handling
 *                                    oopses again (in a die notifier)
 *   insmod nto_crash.ko mode=oopslocked NULL dereference with the task's
 *                                    own lock held: do_exit() then spins on
 *                                    it (a soft lockup after the oops)
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/bug.h>
#include <linux/delay.h>
#include <linux/gfp.h>
#include <linux/kdebug.h>
#include <linux/kthread.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/proc_fs.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/timer.h>

static char *mode = "";
module_param(mode, charp, 0400);
MODULE_PARM_DESC(mode, "null, timer, gpf, bug, warn, lockup, oops2, hang, oom, trigger, nested or oopslocked");

static unsigned int lockup_secs = 30;
module_param(lockup_secs, uint, 0400);
MODULE_PARM_DESC(lockup_secs, "how long mode=lockup spins (seconds)");

static struct timer_list nto_crash_timer;

/* Kept out of line so that the crash has a named frame of its own. */
static noinline int *nto_crash_pointer(unsigned long addr)
{
	return (int *)addr;
}

static noinline void nto_crash_null_deref(void)
{
	int *p = nto_crash_pointer(0);

	WRITE_ONCE(*p, 0x6e746f);
}

/* mode=oops2: one function per CPU, so that each oops has its own RIP */
static atomic_t nto_crash_ready = ATOMIC_INIT(0);

static noinline void nto_crash_null_cpu0(void)
{
	int *p = nto_crash_pointer(0);

	WRITE_ONCE(*p, 0x6e7430);
}

static noinline void nto_crash_null_cpu1(void)
{
	int *p = nto_crash_pointer(8);

	WRITE_ONCE(*p, 0x6e7431);
}

static int nto_crash_oops_thread(void *data)
{
	unsigned long cpu = (unsigned long)data;

	/* Meet the other thread, then both fault at once. */
	atomic_inc(&nto_crash_ready);
	while (atomic_read(&nto_crash_ready) < 2)
		cpu_relax();
	if (cpu)
		nto_crash_null_cpu1();
	else
		nto_crash_null_cpu0();
	return 0;
}

static void nto_crash_oops2(void)
{
	unsigned long cpu;

	for (cpu = 0; cpu < 2; cpu++) {
		struct task_struct *t;

		t = kthread_create(nto_crash_oops_thread, (void *)cpu,
				   "nto_oops/%lu", cpu);
		if (IS_ERR(t))
			return;
		kthread_bind(t, cpu);
		wake_up_process(t);
	}
	msleep(10000);
}

/* mode=oom: what GFP_ATOMIC can take, kept until the panic */
struct nto_crash_hog {
	struct list_head list;
};

static LIST_HEAD(nto_crash_hogs);

static unsigned long nto_crash_take(size_t size)
{
	const gfp_t gfp = GFP_ATOMIC | __GFP_NOWARN | __GFP_NORETRY;
	unsigned long n = 0;
	struct nto_crash_hog *h;

	while ((h = size ? kmalloc(size, gfp) :
		    (struct nto_crash_hog *)__get_free_page(gfp))) {
		list_add(&h->list, &nto_crash_hogs);
		n++;
	}
	return n;
}

static noinline void nto_crash_oom(void)
{
	static const size_t sizes[] = { 0, 8192, 4096, 2048, 1024, 512, 256,
					128, 64, 32, 16 };
	unsigned long pages = nto_crash_take(0), objs = 0, skbs = 0;
	struct sk_buff *skb;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(sizes); i++)
		objs += nto_crash_take(sizes[i]);
	/* The skb heads, which netpoll needs too */
	while ((skb = alloc_skb(1500, GFP_ATOMIC | __GFP_NOWARN)))
		skbs++;
	panic("nto_crash: out of memory (%lu pages, %lu objects, %lu skbs taken)",
	      pages, objs, skbs);
}

/* mode=trigger: /proc/nto_oops oopses whoever writes to it */
static ssize_t nto_crash_oops_write(struct file *file, const char __user *buf,
				    size_t count, loff_t *ppos)
{
	nto_crash_null_deref();
	return count;
}

static const struct proc_ops nto_crash_oops_ops = {
	.proc_write	= nto_crash_oops_write,
	.proc_lseek	= noop_llseek,
};

static struct proc_dir_entry *nto_crash_proc;

static noinline void nto_crash_gpf(void)
{
	int *p = nto_crash_pointer(0xdead000000000100UL);

	WRITE_ONCE(*p, 0x6e746f);
}

static noinline void nto_crash_bug(void)
{
	BUG();
}

static noinline void nto_crash_lockup(void)
{
	unsigned int i;

	preempt_disable();
	for (i = 0; i < lockup_secs * 1000; i++)
		mdelay(1);
	preempt_enable();
}

static void nto_crash_timer_fn(struct timer_list *t)
{
	nto_crash_null_deref();
}

/* mode=nested: the first oops's handling faults once more */
static noinline void nto_crash_nested_fault(void)
{
	int *p = nto_crash_pointer(0);

	WRITE_ONCE(*p, 0x6e6573);
}

static atomic_t nto_crash_nested_once = ATOMIC_INIT(0);

static int nto_crash_die(struct notifier_block *nb, unsigned long val,
			 void *data)
{
	if (val == DIE_OOPS && !atomic_xchg(&nto_crash_nested_once, 1))
		nto_crash_nested_fault();
	return NOTIFY_DONE;
}

static struct notifier_block nto_crash_die_nb = {
	.notifier_call	= nto_crash_die,
};

/* mode=oopslocked: the oops kills the task before it unlocks */
static noinline void nto_crash_oopslocked(void)
{
	task_lock(current);
	nto_crash_null_deref();
	task_unlock(current);
}

static int __init nto_crash_init(void)
{
	/* The tests compare this with the RIP that netoops sends. */
	pr_info("mode=%s nto_crash_null_deref=%px nto_crash_null_cpu0=%px nto_crash_null_cpu1=%px nto_crash_nested_fault=%px\n",
		mode, nto_crash_null_deref, nto_crash_null_cpu0,
		nto_crash_null_cpu1, nto_crash_nested_fault);
	if (!strcmp(mode, "null")) {
		nto_crash_null_deref();
	} else if (!strcmp(mode, "timer")) {
		timer_setup(&nto_crash_timer, nto_crash_timer_fn, 0);
		mod_timer(&nto_crash_timer, jiffies + 1);
		msleep(5000);
	} else if (!strcmp(mode, "gpf")) {
		nto_crash_gpf();
	} else if (!strcmp(mode, "bug")) {
		nto_crash_bug();
	} else if (!strcmp(mode, "warn")) {
		WARN(1, "nto_crash: intended warning\n");
		return 0;
	} else if (!strcmp(mode, "lockup")) {
		nto_crash_lockup();
		return 0;
	} else if (!strcmp(mode, "oops2")) {
		nto_crash_oops2();
	} else if (!strcmp(mode, "hang")) {
		for (;;) {
			set_current_state(TASK_UNINTERRUPTIBLE);
			schedule();
		}
	} else if (!strcmp(mode, "oom")) {
		nto_crash_oom();
	} else if (!strcmp(mode, "trigger")) {
		nto_crash_proc = proc_create("nto_oops", 0200, NULL,
					     &nto_crash_oops_ops);
		return nto_crash_proc ? 0 : -ENOMEM;
	} else if (!strcmp(mode, "nested")) {
		register_die_notifier(&nto_crash_die_nb);
		nto_crash_null_deref();
	} else if (!strcmp(mode, "oopslocked")) {
		nto_crash_oopslocked();
	}
	return -EINVAL;
}

static void __exit nto_crash_exit(void)
{
	if (!strcmp(mode, "nested"))
		unregister_die_notifier(&nto_crash_die_nb);
	proc_remove(nto_crash_proc);
}

module_init(nto_crash_init);
module_exit(nto_crash_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("netoops test module that crashes on purpose");
