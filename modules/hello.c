// SPDX-License-Identifier: GPL-2.0
/* Trivial module that proves the out-of-tree build and load path. */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/init.h>
#include <linux/module.h>

static int __init hello_init(void)
{
	pr_info("loaded\n");
	return 0;
}

static void __exit hello_exit(void)
{
	pr_info("unloaded\n");
}

module_init(hello_init);
module_exit(hello_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("netoops out-of-tree build probe");
