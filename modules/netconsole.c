// SPDX-License-Identifier: GPL-2.0
/*
 * netconsole: a console that sends kernel messages over UDP with netpoll.
 *
 * This is Linux 6.1's netconsole on top of netpoll_targets: same parameter,
 * same configfs directory (/sys/kernel/config/netconsole/), same console
 * names, same messages and the same packets, basic and extended.  The
 * targets, their configfs attributes and the device notifier live in
 * netpoll_targets; this file keeps the consoles and the "extended" and
 * "release" flags.
 *
 * From later kernels, off by default: the release flag of 6.6 (configfs
 * "release", or an 'r' after the '+' of a parameter target) puts the
 * kernel release in front of each extended record.
 *
 * Differences from 6.1: a parameter cannot change while its target is
 * enabled or in transition (-EBUSY rather than -EINVAL), malformed
 * addresses, ports out of range and empty values are refused with -EINVAL
 * instead of being half-applied, and a device notifier racing with the
 * enabling of a target can no longer leave a reference behind.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/console.h>
#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/netpoll.h>
#include <linux/string.h>
#include <linux/utsname.h>

#include "netoops_version.h"
#include "netpoll_targets.h"

#define MAX_PARAM_LENGTH	256
/* Longest UDP payload; longer messages are sent in pieces */
#define MAX_PRINT_CHUNK		1000

/* nt->flags: the target gets the extended format */
#define NETCONSOLE_EXTENDED	BIT(0)
/* nt->flags: the kernel release goes in front of each extended record */
#define NETCONSOLE_RELEASE	BIT(1)

static char config[MAX_PARAM_LENGTH];
module_param_string(netconsole, config, MAX_PARAM_LENGTH, 0);
MODULE_PARM_DESC(netconsole,
		 " netconsole=[+][src-port]@[src-ip]/[dev],[tgt-port]@<tgt-ip>/[tgt-macaddr]");

static bool oops_only;
module_param(oops_only, bool, 0600);
MODULE_PARM_DESC(oops_only, "Only log oops messages");

static struct console netconsole_ext;

/* The extended console is registered when the first extended target is
 * set up, so that printk does not format extended records for nobody.
 */
static DEFINE_MUTEX(netconsole_ext_mutex);
static bool netconsole_ext_registered;

static void netconsole_register_ext(short extra_flags)
{
	mutex_lock(&netconsole_ext_mutex);
	if (!netconsole_ext_registered) {
		netconsole_ext.flags |= CON_ENABLED | extra_flags;
		register_console(&netconsole_ext);
		netconsole_ext_registered = true;
	}
	mutex_unlock(&netconsole_ext_mutex);
}

static bool netconsole_is_extended(const struct netpoll_target *nt)
{
	return nt->flags & NETCONSOLE_EXTENDED;
}

static ssize_t netconsole_extended_show(struct config_item *item, char *buf)
{
	return sysfs_emit(buf, "%d\n",
			  netconsole_is_extended(to_netpoll_target(item)));
}

static ssize_t netconsole_extended_store(struct config_item *item,
					 const char *buf, size_t count)
{
	struct netpoll_target *nt = to_netpoll_target(item);
	int extended;
	int err;

	err = netpoll_target_edit_begin(nt);
	if (err)
		return err;

	if (kstrtoint(buf, 10, &extended) || extended < 0 || extended > 1)
		err = -EINVAL;
	else if (extended)
		nt->flags |= NETCONSOLE_EXTENDED;
	else
		nt->flags &= ~NETCONSOLE_EXTENDED;

	netpoll_target_edit_end(nt);
	return err ? err : strnlen(buf, count);
}

CONFIGFS_ATTR(netconsole_, extended);

static bool netconsole_has_release(const struct netpoll_target *nt)
{
	return nt->flags & NETCONSOLE_RELEASE;
}

static ssize_t netconsole_release_show(struct config_item *item, char *buf)
{
	return sysfs_emit(buf, "%d\n",
			  netconsole_has_release(to_netpoll_target(item)));
}

/* As upstream (6.6): any kstrtobool() value; extended is checked on enable */
static ssize_t netconsole_release_store(struct config_item *item,
					const char *buf, size_t count)
{
	struct netpoll_target *nt = to_netpoll_target(item);
	bool release;
	int err;

	err = netpoll_target_edit_begin(nt);
	if (err)
		return err;

	err = kstrtobool(buf, &release);
	if (!err) {
		if (release)
			nt->flags |= NETCONSOLE_RELEASE;
		else
			nt->flags &= ~NETCONSOLE_RELEASE;
	}

	netpoll_target_edit_end(nt);
	return err ? err : strnlen(buf, count);
}

CONFIGFS_ATTR(netconsole_, release);

static struct configfs_attribute *netconsole_attrs[] = {
	&netconsole_attr_extended,
	&netconsole_attr_release,
	NULL,
};

/*
 * A '+' in front of a parameter target asks for the extended format, an
 * 'r' after it for the kernel release in front of each record (upstream's
 * syntax since 6.6): netconsole=+r@10.0.0.1/eth0,@10.0.0.2/
 */
static int netconsole_parse_prefix(struct netpoll_target *nt, char **opt)
{
	if (**opt == '+') {
		nt->flags |= NETCONSOLE_EXTENDED;
		(*opt)++;
	}
	if (**opt == 'r') {
		if (!netconsole_is_extended(nt)) {
			pr_err("Netconsole configuration error. Release feature requires extended log message\n");
			return -EINVAL;
		}
		nt->flags |= NETCONSOLE_RELEASE;
		(*opt)++;
	}
	return 0;
}

static int netconsole_prepare_enable(struct netpoll_target *nt)
{
	if (netconsole_has_release(nt) && !netconsole_is_extended(nt)) {
		pr_err("Not enabling netconsole. Release feature requires extended log message\n");
		return -EINVAL;
	}
	if (netconsole_is_extended(nt))
		netconsole_register_ext(0);
	return 0;
}

static const struct netpoll_target_ops netconsole_target_ops = {
	.attrs		= netconsole_attrs,
	.parse_prefix	= netconsole_parse_prefix,
	.prepare_enable	= netconsole_prepare_enable,
};

static struct netpoll_targets netconsole_targets = {
	.default_local_port	= 6665,
	.default_remote_port	= 6666,
	/* An interface that is renamed keeps its targets */
	.flags			= NETPOLL_TARGETS_FOLLOW_RENAME,
	.ops			= &netconsole_target_ops,
};

/* Called with the targets lock held */
static bool netconsole_target_ready(const struct netpoll_target *nt,
				    bool extended)
{
	return netpoll_target_enabled(nt) &&
	       netconsole_is_extended(nt) == extended &&
	       netif_running(nt->np.dev);
}

static bool netconsole_idle(void)
{
	/* Avoid the lock and the interrupt toggling when there is no work */
	return (oops_only && !oops_in_progress) ||
	       list_empty(&netconsole_targets.list);
}

/**
 * netconsole_send_ext - send an extended record to a target
 * @nt: the target, with the targets lock held
 * @msg: the record: "<header>;<body>"
 * @len: length of @msg
 *
 * With the release flag the header starts with "<release>,".  A record
 * longer than MAX_PRINT_CHUNK goes out in pieces, each made of that
 * header, ",ncfrag=<offset>/<body length>;" and the part of the body that
 * starts at <offset>.
 */
static void netconsole_send_ext(struct netpoll_target *nt, const char *msg,
				unsigned int len)
{
	static char frag[MAX_PRINT_CHUNK];	/* under the targets lock */
	unsigned int hdr_len, body_len, offset, rel_len = 0;
	const char *body, *release = NULL;

	if (netconsole_has_release(nt)) {
		release = init_utsname()->release;
		rel_len = strlen(release) + 1;		/* and a ',' */
	}

	if (len + rel_len <= MAX_PRINT_CHUNK) {
		if (!release) {
			netpoll_send_udp(&nt->np, msg, len);
			return;
		}
		memcpy(frag, release, rel_len - 1);
		frag[rel_len - 1] = ',';
		memcpy(frag + rel_len, msg, len);
		netpoll_send_udp(&nt->np, frag, rel_len + len);
		return;
	}

	body = memchr(msg, ';', len);
	if (WARN_ON_ONCE(!body || body - msg + rel_len >= MAX_PRINT_CHUNK / 2))
		return;

	hdr_len = body - msg;
	body++;
	body_len = msg + len - body;
	if (release) {
		memcpy(frag, release, rel_len - 1);
		frag[rel_len - 1] = ',';
	}
	memcpy(frag + rel_len, msg, hdr_len);
	hdr_len += rel_len;

	for (offset = 0; offset < body_len; ) {
		unsigned int frag_len, chunk;

		frag_len = hdr_len + scnprintf(frag + hdr_len,
					       sizeof(frag) - hdr_len,
					       ",ncfrag=%u/%u;",
					       offset, body_len);
		chunk = min(body_len - offset, MAX_PRINT_CHUNK - frag_len);
		memcpy(frag + frag_len, body + offset, chunk);
		netpoll_send_udp(&nt->np, frag, frag_len + chunk);
		offset += chunk;
	}
}

static void netconsole_write_ext(struct console *con, const char *msg,
				 unsigned int len)
{
	struct netpoll_target *nt;
	unsigned long flags;

	if (netconsole_idle())
		return;

	spin_lock_irqsave(&netconsole_targets.lock, flags);
	netpoll_targets_for_each(nt, &netconsole_targets) {
		if (netconsole_target_ready(nt, true))
			netconsole_send_ext(nt, msg, len);
	}
	spin_unlock_irqrestore(&netconsole_targets.lock, flags);
}

static void netconsole_write(struct console *con, const char *msg,
			     unsigned int len)
{
	struct netpoll_target *nt;
	unsigned int offset, chunk;
	unsigned long flags;

	if (netconsole_idle())
		return;

	spin_lock_irqsave(&netconsole_targets.lock, flags);
	netpoll_targets_for_each(nt, &netconsole_targets) {
		if (!netconsole_target_ready(nt, false))
			continue;
		/* One target gets the whole message before the next one,
		 * so that dying in here still leaves one complete copy.
		 */
		for (offset = 0; offset < len; offset += chunk) {
			chunk = min_t(unsigned int, len - offset, MAX_PRINT_CHUNK);
			netpoll_send_udp(&nt->np, msg + offset, chunk);
		}
	}
	spin_unlock_irqrestore(&netconsole_targets.lock, flags);
}

static struct console netconsole_ext = {
	.name	= "netcon_ext",
	.flags	= CON_EXTENDED,	/* enabled when first needed */
	.write	= netconsole_write_ext,
};

static struct console netconsole = {
	.name	= "netcon",
	.flags	= CON_ENABLED,
	.write	= netconsole_write,
};

static int __init netconsole_init(void)
{
	struct netpoll_target *nt;
	bool want_ext = false;
	unsigned long flags;
	int err;

	err = register_netpoll_targets(&netconsole_targets, "netconsole",
				       config);
	if (err) {
		pr_err("cleaning up\n");
		return err;
	}

	/* The parameter targets (the unnamed ones) get the log so far */
	spin_lock_irqsave(&netconsole_targets.lock, flags);
	netpoll_targets_for_each(nt, &netconsole_targets) {
		if (config_item_name(&nt->item))
			continue;
		if (netconsole_is_extended(nt))
			want_ext = true;
		else
			netconsole.flags |= CON_PRINTBUFFER;
	}
	spin_unlock_irqrestore(&netconsole_targets.lock, flags);

	if (want_ext)
		netconsole_register_ext(CON_PRINTBUFFER);
	register_console(&netconsole);
	pr_info("network logging started\n");

	return 0;
}

static void __exit netconsole_exit(void)
{
	unregister_console(&netconsole_ext);
	unregister_console(&netconsole);
	unregister_netpoll_targets(&netconsole_targets);
}

module_init(netconsole_init);
module_exit(netconsole_exit);

MODULE_DESCRIPTION("Console driver for network interfaces");
MODULE_LICENSE("GPL");
MODULE_VERSION(NETOOPS_MODULE_VERSION);
