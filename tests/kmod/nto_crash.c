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
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bug.h>
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/string.h>
#include <linux/timer.h>

static char *mode = "";
module_param(mode, charp, 0400);
MODULE_PARM_DESC(mode, "null, timer, gpf, bug, warn or lockup");

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

static int __init nto_crash_init(void)
{
	/* The tests compare this with the RIP that netoops sends. */
	pr_info("mode=%s nto_crash_null_deref=%px\n", mode,
		nto_crash_null_deref);
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
	}
	return -EINVAL;
}

static void __exit nto_crash_exit(void)
{
}

module_init(nto_crash_init);
module_exit(nto_crash_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("netoops test module that crashes on purpose");
