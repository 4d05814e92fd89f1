// SPDX-License-Identifier: GPL-2.0
/*
 * Test-only module for the netconsole benchmark: printk bursts, timed in
 * the kernel.  Loading it prints @rounds rounds of five messages (three
 * short, one of 200 characters, one of 900: two pieces on an extended
 * target with userdata and sysdata) as fast as printk goes, and then
 * "nto_flood: N messages in T ns".  The time includes every console's
 * write: the benchmark subtracts a run without netconsole.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/string.h>

static unsigned int rounds = 1000;
module_param(rounds, uint, 0444);
MODULE_PARM_DESC(rounds, "rounds of five messages (default 1000)");

static char nto_flood_medium[201];
static char nto_flood_long[901];

static int __init nto_flood_init(void)
{
	unsigned int i;
	u64 start, took;

	memset(nto_flood_medium, 'm', sizeof(nto_flood_medium) - 1);
	memset(nto_flood_long, 'l', sizeof(nto_flood_long) - 1);
	start = ktime_get_ns();
	for (i = 0; i < rounds; i++) {
		pr_info("nc-flood %u short one\n", i);
		pr_info("nc-flood %u medium %s\n", i, nto_flood_medium);
		pr_info("nc-flood %u short two\n", i);
		pr_info("nc-flood %u long %s\n", i, nto_flood_long);
		pr_info("nc-flood %u short three\n", i);
	}
	took = ktime_get_ns() - start;
	pr_info("%u messages in %llu ns\n", 5 * rounds, took);
	return 0;
}

static void __exit nto_flood_exit(void)
{
}

module_init(nto_flood_init);
module_exit(nto_flood_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("netoops test: timed printk bursts for the netconsole benchmark");
