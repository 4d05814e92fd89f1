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
 * kernel release in front of each extended record; a configfs target's
 * userdata/ directory (6.9) holds keys whose " key=value" lines follow
 * each extended record, and the sysdata switches cpu_nr, taskname_enabled,
 * release_enabled (6.15) and msgid_enabled (6.17) add lines of their own.
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
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/string.h>
#include <linux/utsname.h>

#include "netoops_version.h"
#include "netpoll_targets.h"

#define MAX_PARAM_LENGTH	256
/* Longest UDP payload; longer messages are sent in pieces */
#define MAX_PRINT_CHUNK		1000

/* Upstream's userdata limits: " <key>=<value>\n" in 256 bytes */
#define MAX_USERDATA_ENTRY_LENGTH	256
#define MAX_USERDATA_VALUE_LENGTH	200
#define MAX_USERDATA_NAME_LENGTH	(MAX_USERDATA_ENTRY_LENGTH - \
					 MAX_USERDATA_VALUE_LENGTH - 3)
#define MAX_USERDATA_ITEMS		256

/* Sysdata fields, each a bool in userdata/ */
#define SYSDATA_CPU_NR		BIT(0)
#define SYSDATA_TASKNAME	BIT(1)
#define SYSDATA_RELEASE		BIT(2)
#define SYSDATA_MSGID		BIT(3)
/* " cpu=%u\n taskname=%s\n release=%s\n msgid=%u\n", at most */
#define MAX_SYSDATA_LENGTH	(16 + 11 + TASK_COMM_LEN + 11 + \
				 __NEW_UTS_LEN + 10 + 10)

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

/* Off by default, as in 6.1; a configfs target has its own "resume" */
static bool resume;
module_param(resume, bool, 0444);
MODULE_PARM_DESC(resume, "Parameter targets resume when their interface is back");

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

/*
 * Set or clear a flag of a disabled target: -EBUSY first, as 6.1 does,
 * then @parse_err, the caller's verdict on the value.
 */
static ssize_t netconsole_flag_store(struct config_item *item, u32 flag,
				     int parse_err, bool on, size_t len)
{
	struct netpoll_target *nt = to_netpoll_target(item);
	int err;

	err = netpoll_target_edit_begin(nt);
	if (err)
		return err;

	if (!parse_err) {
		if (on)
			nt->flags |= flag;
		else
			nt->flags &= ~flag;
	}

	netpoll_target_edit_end(nt);
	return parse_err ? parse_err : len;
}

static ssize_t netconsole_extended_show(struct config_item *item, char *buf)
{
	return sysfs_emit(buf, "%d\n",
			  netconsole_is_extended(to_netpoll_target(item)));
}

/* 0 or 1, as 6.1 takes it */
static ssize_t netconsole_extended_store(struct config_item *item,
					 const char *buf, size_t count)
{
	int extended = 0;
	bool bad;

	bad = kstrtoint(buf, 10, &extended) || extended < 0 || extended > 1;
	return netconsole_flag_store(item, NETCONSOLE_EXTENDED, bad ? -EINVAL : 0,
				     extended == 1, strnlen(buf, count));
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
	bool release = false;
	int err;

	err = kstrtobool(buf, &release);
	return netconsole_flag_store(item, NETCONSOLE_RELEASE, err, release,
				     strnlen(buf, count));
}

CONFIGFS_ATTR(netconsole_, release);

static struct configfs_attribute *netconsole_attrs[] = {
	&netconsole_attr_extended,
	&netconsole_attr_release,
	NULL,
};

/**
 * struct netconsole_userdata - a configfs target's userdata/ directory
 * @group: the directory: sysdata switches, and an item per key
 * @nt: its target; used only by attribute methods, which configfs no
 *	longer calls once the target is removed
 * @sysdata: SYSDATA_* fields appended to each extended record
 * @msgid: the number of the next record (sysdata msgid); under the lock
 * @items: keys made in @group
 * @text: " <key>=<value>\n" for each key with a value, in directory
 *	order; replaced under the targets lock, read by senders under it
 * @len: length of @text
 *
 * Allocated apart from the target: an open attribute file holds a
 * reference to @group alone, so @group is freed by its own release.
 */
struct netconsole_userdata {
	struct config_group	group;
	struct netpoll_target	*nt;
	u32			sysdata;
	u32			msgid;
	unsigned int		items;
	char			*text;
	size_t			len;
};

/* One userdata key: userdata/<key>/value */
struct netconsole_userdatum {
	struct config_item	item;
	char			value[MAX_USERDATA_VALUE_LENGTH + 1];
};

static struct netconsole_userdata *to_userdata(struct config_item *item)
{
	return container_of(to_config_group(item), struct netconsole_userdata,
			    group);
}

static struct netconsole_userdatum *to_userdatum(struct config_item *item)
{
	return container_of(item, struct netconsole_userdatum, item);
}

/*
 * Rebuild @ud->text from the keys, with the subsystem's configfs mutex
 * held (the keys cannot change), and swap it in under the targets lock.
 */
static int netconsole_userdata_update(struct netconsole_userdata *ud)
{
	struct netpoll_targets *nts = ud->nt->nts;
	struct netconsole_userdatum *udm;
	struct config_item *item;
	char *text = NULL, *old;
	unsigned long flags;
	size_t len = 0;

	list_for_each_entry(item, &ud->group.cg_children, ci_entry) {
		udm = to_userdatum(item);
		if (udm->value[0])
			len += strlen(config_item_name(item)) + strlen(udm->value) + 3;
	}
	if (len) {
		text = kvmalloc(len + 1, GFP_KERNEL);	/* 64 KiB at most */
		if (!text)
			return -ENOMEM;
		len = 0;
		list_for_each_entry(item, &ud->group.cg_children, ci_entry) {
			udm = to_userdatum(item);
			if (udm->value[0])
				len += sprintf(text + len, " %s=%s\n",
					       config_item_name(item), udm->value);
		}
	}

	spin_lock_irqsave(&nts->lock, flags);
	old = ud->text;
	ud->text = text;
	ud->len = len;
	spin_unlock_irqrestore(&nts->lock, flags);
	kvfree(old);
	return 0;
}

/* No userdata at all: what is left when a rebuild fails on a removal */
static void netconsole_userdata_clear(struct netconsole_userdata *ud)
{
	unsigned long flags;
	char *old;

	spin_lock_irqsave(&ud->nt->nts->lock, flags);
	old = ud->text;
	ud->text = NULL;
	ud->len = 0;
	spin_unlock_irqrestore(&ud->nt->nts->lock, flags);
	kvfree(old);
}

static ssize_t netconsole_userdatum_value_show(struct config_item *item,
					       char *buf)
{
	return sysfs_emit(buf, "%s\n", to_userdatum(item)->value);
}

/* As upstream: at most 200 bytes, newline included; editable while enabled */
static ssize_t netconsole_userdatum_value_store(struct config_item *item,
						const char *buf, size_t count)
{
	struct netconsole_userdatum *udm = to_userdatum(item);
	struct netconsole_userdata *ud = to_userdata(item->ci_parent);
	struct mutex *su_mutex = &ud->nt->nts->configfs_subsys.su_mutex;
	char old[MAX_USERDATA_VALUE_LENGTH + 1];
	size_t len;
	int err;

	if (count > MAX_USERDATA_VALUE_LENGTH)
		return -EMSGSIZE;

	mutex_lock(su_mutex);
	memcpy(old, udm->value, sizeof(old));
	len = strnlen(buf, count);
	memcpy(udm->value, buf, len);
	if (len && udm->value[len - 1] == '\n')	/* echo's newline */
		len--;
	udm->value[len] = '\0';
	err = netconsole_userdata_update(ud);
	if (err)
		memcpy(udm->value, old, sizeof(old));
	mutex_unlock(su_mutex);
	return err ? err : count;
}

CONFIGFS_ATTR(netconsole_userdatum_, value);

static struct configfs_attribute *netconsole_userdatum_attrs[] = {
	&netconsole_userdatum_attr_value,
	NULL,
};

static void netconsole_userdatum_release(struct config_item *item)
{
	kfree(to_userdatum(item));
}

static struct configfs_item_operations netconsole_userdatum_ops = {
	.release	= netconsole_userdatum_release,
};

static const struct config_item_type netconsole_userdatum_type = {
	.ct_item_ops	= &netconsole_userdatum_ops,
	.ct_attrs	= netconsole_userdatum_attrs,
	.ct_owner	= THIS_MODULE,
};

static struct config_item *netconsole_userdata_make_item(struct config_group *group,
							 const char *name)
{
	struct netconsole_userdata *ud = to_userdata(&group->cg_item);
	struct netconsole_userdatum *udm;

	if (strlen(name) > MAX_USERDATA_NAME_LENGTH)
		return ERR_PTR(-ENAMETOOLONG);
	if (ud->items >= MAX_USERDATA_ITEMS)
		return ERR_PTR(-ENOSPC);

	udm = kzalloc(sizeof(*udm), GFP_KERNEL);
	if (!udm)
		return ERR_PTR(-ENOMEM);
	config_item_init_type_name(&udm->item, name, &netconsole_userdatum_type);
	ud->items++;
	return &udm->item;
}

/* Called with the configfs mutex held, the item already off the list */
static void netconsole_userdata_drop_item(struct config_group *group,
					  struct config_item *item)
{
	struct netconsole_userdata *ud = to_userdata(&group->cg_item);

	ud->items--;
	/* Never send a removed key: without memory, send no userdata */
	if (netconsole_userdata_update(ud))
		netconsole_userdata_clear(ud);
	config_item_put(item);
}

static struct configfs_group_operations netconsole_userdata_group_ops = {
	.make_item	= netconsole_userdata_make_item,
	.drop_item	= netconsole_userdata_drop_item,
};

static ssize_t netconsole_sysdata_show(struct config_item *item, char *buf,
				       u32 field)
{
	return sysfs_emit(buf, "%d\n", !!(to_userdata(item)->sysdata & field));
}

/* kstrtobool, like upstream; editable while the target is enabled */
static ssize_t netconsole_sysdata_store(struct config_item *item,
					const char *buf, size_t count, u32 field)
{
	struct netconsole_userdata *ud = to_userdata(item);
	unsigned long flags;
	bool on;
	int err;

	err = kstrtobool(buf, &on);
	if (err)
		return err;
	spin_lock_irqsave(&ud->nt->nts->lock, flags);
	if (on)
		ud->sysdata |= field;
	else
		ud->sysdata &= ~field;
	spin_unlock_irqrestore(&ud->nt->nts->lock, flags);
	return count;
}

#define NETCONSOLE_SYSDATA_ATTR(_name, _field)				\
static const u32 netconsole_ud_##_name##_field = (_field);		\
static ssize_t netconsole_ud_##_name##_show(struct config_item *item,	\
					    char *buf)			\
{									\
	return netconsole_sysdata_show(item, buf,			\
				       netconsole_ud_##_name##_field);	\
}									\
static ssize_t netconsole_ud_##_name##_store(struct config_item *item,	\
					     const char *buf,		\
					     size_t count)		\
{									\
	return netconsole_sysdata_store(item, buf, count,		\
					netconsole_ud_##_name##_field);	\
}									\
CONFIGFS_ATTR(netconsole_ud_, _name)

NETCONSOLE_SYSDATA_ATTR(cpu_nr, SYSDATA_CPU_NR);
NETCONSOLE_SYSDATA_ATTR(taskname_enabled, SYSDATA_TASKNAME);
NETCONSOLE_SYSDATA_ATTR(release_enabled, SYSDATA_RELEASE);
NETCONSOLE_SYSDATA_ATTR(msgid_enabled, SYSDATA_MSGID);

static struct configfs_attribute *netconsole_userdata_attrs[] = {
	&netconsole_ud_attr_cpu_nr,
	&netconsole_ud_attr_taskname_enabled,
	&netconsole_ud_attr_release_enabled,
	&netconsole_ud_attr_msgid_enabled,
	NULL,
};

static void netconsole_userdata_release(struct config_item *item)
{
	struct netconsole_userdata *ud = to_userdata(item);

	kvfree(ud->text);
	kfree(ud);
}

static struct configfs_item_operations netconsole_userdata_item_ops = {
	.release	= netconsole_userdata_release,
};

static const struct config_item_type netconsole_userdata_type = {
	.ct_item_ops	= &netconsole_userdata_item_ops,
	.ct_group_ops	= &netconsole_userdata_group_ops,
	.ct_attrs	= netconsole_userdata_attrs,
	.ct_owner	= THIS_MODULE,
};

/* A configfs target gets userdata/ (upstream 6.9, sysdata 6.15 and 6.17) */
static int netconsole_init_group(struct netpoll_target *nt)
{
	struct netconsole_userdata *ud;

	ud = kzalloc(sizeof(*ud), GFP_KERNEL);
	if (!ud)
		return -ENOMEM;
	ud->nt = nt;
	config_group_init_type_name(&ud->group, "userdata",
				    &netconsole_userdata_type);
	configfs_add_default_group(&ud->group, &nt->group);
	nt->priv = ud;
	return 0;
}

static void netconsole_free_target(struct netpoll_target *nt)
{
	/* Puts userdata/; an open attribute file may hold it a while */
	if (nt->priv)
		configfs_remove_default_groups(&nt->group);
}

/*
 * A '+' in front of a parameter target asks for the extended format, an
 * 'r' after it for the kernel release in front of each record (upstream's
 * syntax since 6.6): netconsole=+r@10.0.0.1/eth0,@10.0.0.2/
 */
static int netconsole_parse_prefix(struct netpoll_target *nt, char **opt)
{
	nt->resume = resume;
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
	.init_group	= netconsole_init_group,
	.free_target	= netconsole_free_target,
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

/* What goes after the record's text: userdata, then sysdata */
struct netconsole_extra {
	const char	*userdata;
	size_t		userdata_len;
	size_t		sysdata_len;
};

/* Under the targets lock, as is the buffer it writes to */
static void netconsole_extra(struct netpoll_target *nt, char *sysdata,
			     struct netconsole_extra *x)
{
	struct netconsole_userdata *ud = nt->priv;
	size_t len = 0;

	memset(x, 0, sizeof(*x));
	if (!ud)
		return;
	x->userdata = ud->text;
	x->userdata_len = ud->len;
	if (ud->sysdata & SYSDATA_CPU_NR)
		len += scnprintf(sysdata + len, MAX_SYSDATA_LENGTH - len,
				 " cpu=%u\n", raw_smp_processor_id());
	if (ud->sysdata & SYSDATA_TASKNAME)
		len += scnprintf(sysdata + len, MAX_SYSDATA_LENGTH - len,
				 " taskname=%s\n", current->comm);
	if (ud->sysdata & SYSDATA_RELEASE)
		len += scnprintf(sysdata + len, MAX_SYSDATA_LENGTH - len,
				 " release=%s\n", init_utsname()->release);
	if (ud->sysdata & SYSDATA_MSGID)
		len += scnprintf(sysdata + len, MAX_SYSDATA_LENGTH - len,
				 " msgid=%u\n", ud->msgid++);
	x->sysdata_len = len;
}

/* Copy @n bytes from @off of the concatenation of @segs into @dst */
static void netconsole_copy(char *dst, unsigned int off, unsigned int n,
			    const char * const *segs, const size_t *lens,
			    int nsegs)
{
	int i;

	for (i = 0; i < nsegs && n; i++) {
		unsigned int take;

		if (off >= lens[i]) {
			off -= lens[i];
			continue;
		}
		take = min_t(size_t, lens[i] - off, n);
		memcpy(dst, segs[i] + off, take);
		dst += take;
		n -= take;
		off = 0;
	}
}

/**
 * netconsole_send_ext - send an extended record to a target
 * @nt: the target, with the targets lock held
 * @msg: the record: "<header>;<body>"
 * @len: length of @msg
 *
 * With the release flag the header starts with "<release>,"; the body is
 * followed by the target's userdata and sysdata lines, if any.  A record
 * longer than MAX_PRINT_CHUNK goes out in pieces, each made of that
 * header, ",ncfrag=<offset>/<body length>;" and the part of the body that
 * starts at <offset>.  With no option on, the packets are 6.1's.
 */
static void netconsole_send_ext(struct netpoll_target *nt, const char *msg,
				unsigned int len)
{
	/* Under the targets lock */
	static char frag[MAX_PRINT_CHUNK], sysdata[MAX_SYSDATA_LENGTH];
	unsigned int hdr_len, body_len, offset, rel_len = 0;
	const char *body, *release = NULL;
	struct netconsole_extra x;
	const char *segs[3];
	size_t lens[3];

	if (netconsole_has_release(nt)) {
		release = init_utsname()->release;
		rel_len = strlen(release) + 1;		/* and a ',' */
	}
	netconsole_extra(nt, sysdata, &x);

	if (!release && !x.userdata_len && !x.sysdata_len &&
	    len <= MAX_PRINT_CHUNK) {
		netpoll_send_udp(&nt->np, msg, len);
		return;
	}

	if (release) {
		memcpy(frag, release, rel_len - 1);
		frag[rel_len - 1] = ',';
	}
	segs[1] = x.userdata;
	lens[1] = x.userdata_len;
	segs[2] = sysdata;
	lens[2] = x.sysdata_len;

	if (rel_len + len + lens[1] + lens[2] <= MAX_PRINT_CHUNK) {
		segs[0] = msg;
		lens[0] = len;
		netconsole_copy(frag + rel_len, 0, len + lens[1] + lens[2],
				segs, lens, 3);
		netpoll_send_udp(&nt->np, frag, rel_len + len + lens[1] + lens[2]);
		return;
	}

	body = memchr(msg, ';', len);
	if (WARN_ON_ONCE(!body || body - msg + rel_len >= MAX_PRINT_CHUNK / 2))
		return;

	hdr_len = body - msg;
	body++;
	memcpy(frag + rel_len, msg, hdr_len);
	hdr_len += rel_len;
	segs[0] = body;
	lens[0] = msg + len - body;
	body_len = lens[0] + lens[1] + lens[2];

	for (offset = 0; offset < body_len; ) {
		unsigned int frag_len, chunk;

		frag_len = hdr_len + scnprintf(frag + hdr_len,
					       sizeof(frag) - hdr_len,
					       ",ncfrag=%u/%u;",
					       offset, body_len);
		chunk = min(body_len - offset, MAX_PRINT_CHUNK - frag_len);
		netconsole_copy(frag + frag_len, offset, chunk, segs, lens, 3);
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
		if (config_item_name(&nt->group.cg_item))
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
