// SPDX-License-Identifier: GPL-2.0
/*
 * netpoll targets: the target handling that netconsole and netoops share.
 *
 * Locking.  Three locks protect a set of targets:
 *
 *  - nts->mutex serialises configuration: configfs stores, mkdir/rmdir
 *    and (un)registration.  Only its holder moves a target out of
 *    DISABLED, so a disabled target stays disabled while it is held.
 *  - RTNL serialises the netpoll of a target against the device
 *    notifier.  Every ENABLED -> CLEANING -> DISABLED transition happens
 *    with RTNL held from start to end, so the notifier (which runs under
 *    RTNL) never meets a target in CLEANING, and whoever holds RTNL may
 *    release the device of an enabled target.
 *  - nts->lock, a spinlock because senders may not sleep, protects the
 *    list and the state.  Senders transmit only to ENABLED targets while
 *    they hold it, so a target that left ENABLED under the lock is no
 *    longer used and its netpoll can be torn down.  Nothing sleeps or
 *    prints under it: a message would recurse into netconsole.
 *
 * The order is nts->mutex, then RTNL, then nts->lock.  The device
 * notifier cannot take nts->mutex (RTNL is held when it runs); it does
 * not need to, thanks to the rules above.
 */

/* Every message names the subsystem that owns the target, as netconsole's
 * messages did before the split, so no module name is prepended.
 */
#define pr_fmt(fmt) fmt

#include <linux/configfs.h>
#include <linux/etherdevice.h>
#include <linux/inet.h>
#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/netpoll.h>
#include <linux/rtnetlink.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "netoops_version.h"
#include "netpoll_targets.h"

#define nts_info(nts, fmt, ...)	\
	pr_info("%s: " fmt, (nts)->subsys_name, ##__VA_ARGS__)
#define nts_err(nts, fmt, ...)	\
	pr_err("%s: " fmt, (nts)->subsys_name, ##__VA_ARGS__)

/* Longest value of an address attribute, with room for a newline */
#define NT_ADDR_STRLEN		(INET6_ADDRSTRLEN + 2)

static enum netpoll_target_state nt_state(const struct netpoll_target *nt)
{
	return READ_ONCE(nt->state);
}

static void nt_set_state(struct netpoll_target *nt,
			 enum netpoll_target_state state)
{
	lockdep_assert_held(&nt->nts->lock);
	WRITE_ONCE(nt->state, state);
}

static void nt_free(struct kref *kref)
{
	struct netpoll_target *nt = container_of(kref, struct netpoll_target, kref);
	const struct netpoll_target_ops *ops = nt->nts->ops;

	if (ops && ops->free_target)
		ops->free_target(nt);
	kfree(nt);
}

/**
 * netpoll_target_get - take a reference on a target
 * @nt: the target
 *
 * The reference keeps the memory of @nt, not its netpoll.
 */
void netpoll_target_get(struct netpoll_target *nt)
{
	kref_get(&nt->kref);
}
EXPORT_SYMBOL_GPL(netpoll_target_get);

/**
 * netpoll_target_put - drop a reference on a target
 * @nt: the target; freed with the last reference
 */
void netpoll_target_put(struct netpoll_target *nt)
{
	kref_put(&nt->kref, nt_free);
}
EXPORT_SYMBOL_GPL(netpoll_target_put);

static struct netpoll_target *nt_alloc(struct netpoll_targets *nts)
{
	struct netpoll_target *nt;

	nt = kzalloc(sizeof(*nt), GFP_KERNEL);
	if (!nt)
		return NULL;

	nt->nts = nts;
	INIT_LIST_HEAD(&nt->list);
	kref_init(&nt->kref);
	nt->state = NETPOLL_TARGET_DISABLED;
	nt->np.name = nts->subsys_name;
	strscpy(nt->np.dev_name, "eth0", IFNAMSIZ);
	nt->np.local_port = nts->default_local_port;
	nt->np.remote_port = nts->default_remote_port;
	eth_broadcast_addr(nt->np.remote_mac);

	return nt;
}

static void nt_link(struct netpoll_target *nt)
{
	struct netpoll_targets *nts = nt->nts;
	unsigned long flags;

	spin_lock_irqsave(&nts->lock, flags);
	list_add(&nt->list, &nts->list);
	spin_unlock_irqrestore(&nts->lock, flags);
}

static void nt_unlink(struct netpoll_target *nt)
{
	struct netpoll_targets *nts = nt->nts;
	unsigned long flags;

	spin_lock_irqsave(&nts->lock, flags);
	list_del_init(&nt->list);
	spin_unlock_irqrestore(&nts->lock, flags);
}

/* Tear down the netpoll of a target that senders no longer use and drop
 * its device reference.  Called with RTNL held, so the reference is gone
 * before an unregistering device waits for its references.
 */
static void nt_release_dev(struct netpoll_target *nt)
{
	ASSERT_RTNL();

	if (!nt->np.dev)
		return;
	__netpoll_cleanup(&nt->np);
	netdev_put(nt->np.dev, &nt->np.dev_tracker);
	nt->np.dev = NULL;
}

/* After netpoll_setup() dropped RTNL, did the device go away, move under a
 * master or change its name before the target could be marked enabled?
 * The device notifier ignored the target meanwhile.
 */
static bool nt_dev_lost(struct netpoll_target *nt)
{
	struct net_device *dev = nt->np.dev;
	unsigned long flags;

	ASSERT_RTNL();

	if (dev->reg_state != NETREG_REGISTERED ||
	    netdev_master_upper_dev_get(dev))
		return true;
	if (!strcmp(dev->name, nt->np.dev_name))
		return false;
	if (!(nt->nts->flags & NETPOLL_TARGETS_FOLLOW_RENAME))
		return true;

	spin_lock_irqsave(&nt->nts->lock, flags);
	strscpy(nt->np.dev_name, dev->name, IFNAMSIZ);
	spin_unlock_irqrestore(&nt->nts->lock, flags);
	return false;
}

/* Set up the netpoll of a disabled target.  Called with nts->mutex held.
 * With @announce, "network logging started" is logged just before the
 * target goes live, so that, as in netconsole, the target itself does not
 * get the message.
 */
static int nt_enable(struct netpoll_target *nt, bool announce)
{
	struct netpoll_targets *nts = nt->nts;
	unsigned long flags;
	int err;

	lockdep_assert_held(&nts->mutex);

	spin_lock_irqsave(&nts->lock, flags);
	nt_set_state(nt, NETPOLL_TARGET_SETTINGUP);
	spin_unlock_irqrestore(&nts->lock, flags);

	err = netpoll_setup(&nt->np);
	if (err) {
		/* __netpoll_setup() may leave a stale pointer behind */
		nt->np.dev = NULL;
		goto out_disabled;
	}

	rtnl_lock();
	if (nt_dev_lost(nt)) {
		nts_err(nts, "%s went away during setup, aborting\n",
			nt->np.dev_name);
		nt_release_dev(nt);
		rtnl_unlock();
		err = -ENODEV;
		goto out_disabled;
	}
	if (announce)
		nts_info(nts, "network logging started\n");
	spin_lock_irqsave(&nts->lock, flags);
	nt_set_state(nt, NETPOLL_TARGET_ENABLED);
	spin_unlock_irqrestore(&nts->lock, flags);
	rtnl_unlock();

	return 0;

out_disabled:
	spin_lock_irqsave(&nts->lock, flags);
	nt_set_state(nt, NETPOLL_TARGET_DISABLED);
	spin_unlock_irqrestore(&nts->lock, flags);
	return err;
}

/* Disable a target if it is enabled.  Called with nts->mutex held.  Taking
 * RTNL first also waits for a notifier that is disabling the target.
 */
static void nt_disable(struct netpoll_target *nt)
{
	struct netpoll_targets *nts = nt->nts;
	unsigned long flags;
	bool enabled;

	rtnl_lock();
	spin_lock_irqsave(&nts->lock, flags);
	enabled = nt->state == NETPOLL_TARGET_ENABLED;
	if (enabled)
		nt_set_state(nt, NETPOLL_TARGET_CLEANING);
	spin_unlock_irqrestore(&nts->lock, flags);

	if (enabled) {
		nt_release_dev(nt);

		spin_lock_irqsave(&nts->lock, flags);
		nt_set_state(nt, NETPOLL_TARGET_DISABLED);
		spin_unlock_irqrestore(&nts->lock, flags);
	}
	rtnl_unlock();
}

/* Find an enabled target on @dev, take it away from the senders and
 * return it with a reference held.  Called with RTNL held.
 */
static struct netpoll_target *nts_claim_target(struct netpoll_targets *nts,
					       struct net_device *dev)
{
	struct netpoll_target *nt;
	unsigned long flags;

	spin_lock_irqsave(&nts->lock, flags);
	netpoll_targets_for_each(nt, nts) {
		if (nt->state == NETPOLL_TARGET_ENABLED && nt->np.dev == dev) {
			nt_set_state(nt, NETPOLL_TARGET_CLEANING);
			netpoll_target_get(nt);
			spin_unlock_irqrestore(&nts->lock, flags);
			return nt;
		}
	}
	spin_unlock_irqrestore(&nts->lock, flags);

	return NULL;
}

static void nts_follow_rename(struct netpoll_targets *nts,
			      struct net_device *dev)
{
	struct netpoll_target *nt;
	unsigned long flags;

	spin_lock_irqsave(&nts->lock, flags);
	netpoll_targets_for_each(nt, nts) {
		if (nt->state == NETPOLL_TARGET_ENABLED && nt->np.dev == dev)
			strscpy(nt->np.dev_name, dev->name, IFNAMSIZ);
	}
	spin_unlock_irqrestore(&nts->lock, flags);
}

static const char *nts_event_reason(unsigned long event)
{
	switch (event) {
	case NETDEV_UNREGISTER:
		return "unregistered";
	case NETDEV_RELEASE:
		return "released slaves";
	case NETDEV_JOIN:
		return "is joining a master device";
	case NETDEV_CHANGENAME:
		return "was renamed";
	default:
		return "had an event";
	}
}

/* Is a target that waits to resume on the name of @dev, which is up and
 * has no master?  Called with RTNL held.
 */
static bool nts_waits_for(struct netpoll_targets *nts, struct net_device *dev)
{
	struct netpoll_target *nt;
	unsigned long flags;
	bool found = false;

	if (!net_eq(dev_net(dev), &init_net) || !netif_running(dev) ||
	    netdev_master_upper_dev_get(dev))
		return false;
	spin_lock_irqsave(&nts->lock, flags);
	netpoll_targets_for_each(nt, nts) {
		if (nt->deactivated && !strcmp(nt->np.dev_name, dev->name)) {
			found = true;
			break;
		}
	}
	spin_unlock_irqrestore(&nts->lock, flags);
	return found;
}

/* A deactivated target not yet tried in run @gen of the resume work, whose
 * device is up with no master, with a reference held; NULL if none.
 * Called with nts->mutex held, so the target stays disabled.  It keeps
 * waiting until it is enabled, so an event meanwhile runs the work again.
 */
static struct netpoll_target *nts_take_resumable(struct netpoll_targets *nts,
						 u32 gen)
{
	struct netpoll_target *nt, *found = NULL;
	struct net_device *dev;
	unsigned long flags;

	rcu_read_lock();
	spin_lock_irqsave(&nts->lock, flags);
	netpoll_targets_for_each(nt, nts) {
		if (!nt->deactivated || nt->resume_gen == gen ||
		    nt->state != NETPOLL_TARGET_DISABLED)
			continue;
		dev = dev_get_by_name_rcu(&init_net, nt->np.dev_name);
		if (dev && netif_running(dev) &&
		    !netdev_master_upper_dev_get_rcu(dev)) {
			nt->resume_gen = gen;
			netpoll_target_get(nt);
			found = nt;
			break;
		}
	}
	spin_unlock_irqrestore(&nts->lock, flags);
	rcu_read_unlock();
	return found;
}

/* The resume work: enable the deactivated targets whose device is back,
 * each at most once a run.  A target that fails keeps waiting.
 */
static void nts_resume_work(struct work_struct *work)
{
	struct netpoll_targets *nts = container_of(work, struct netpoll_targets,
						   resume_work);
	const struct netpoll_target_ops *ops = nts->ops;
	struct netpoll_target *nt;
	unsigned long flags;
	u32 gen;
	int err;

	mutex_lock(&nts->mutex);
	gen = ++nts->resume_gen;
	while ((nt = nts_take_resumable(nts, gen))) {
		err = nt_enable(nt, false);
		if (err) {
			nts_err(nts, "network logging not resumed on interface %s: %d\n",
				nt->np.dev_name, err);
		} else {
			spin_lock_irqsave(&nts->lock, flags);
			nt->deactivated = false;
			spin_unlock_irqrestore(&nts->lock, flags);
			if (ops && ops->enabled)
				ops->enabled(nt);
			nts_info(nts, "network logging resumed on interface %s\n",
				 nt->np.dev_name);
		}
		netpoll_target_put(nt);
	}
	mutex_unlock(&nts->mutex);
}

/* No target waits for its device any more (the set is going away) */
static void nts_stop_resuming(struct netpoll_targets *nts)
{
	struct netpoll_target *nt;
	unsigned long flags;

	mutex_lock(&nts->mutex);
	spin_lock_irqsave(&nts->lock, flags);
	netpoll_targets_for_each(nt, nts) {
		nt->resume = false;
		nt->deactivated = false;
	}
	spin_unlock_irqrestore(&nts->lock, flags);
	mutex_unlock(&nts->mutex);
}

/* The notifier runs in process context with RTNL held.  It tears the
 * netpoll down right here, with the targets lock dropped: a work item
 * would need RTNL for __netpoll_cleanup() and could be neither flushed
 * here nor left to run late, because an unregistering device must lose
 * our reference before this returns.  The reference held on a claimed
 * target keeps it alive while the lock is dropped, and claiming takes the
 * target out of ENABLED, so the walk ends.
 */
static int nts_netdev_event(struct notifier_block *nb, unsigned long event,
			    void *ptr)
{
	struct net_device *dev = netdev_notifier_info_to_dev(ptr);
	struct netpoll_targets *nts;
	struct netpoll_target *nt;
	bool stopped = false, waiting = false;
	unsigned long flags;

	nts = container_of(nb, struct netpoll_targets, netdev_notifier);

	switch (event) {
	case NETDEV_CHANGENAME:
		if (nts->flags & NETPOLL_TARGETS_FOLLOW_RENAME) {
			nts_follow_rename(nts, dev);
			return NOTIFY_DONE;
		}
		break;
	case NETDEV_UNREGISTER:
	case NETDEV_RELEASE:
	case NETDEV_JOIN:
		break;
	case NETDEV_UP:
	case NETDEV_CHANGEUPPER:
		/* up, or out of a master: targets waiting for it resume */
		if (nts_waits_for(nts, dev))
			schedule_work(&nts->resume_work);
		return NOTIFY_DONE;
	default:
		return NOTIFY_DONE;
	}

	while ((nt = nts_claim_target(nts, dev))) {
		nt_release_dev(nt);

		spin_lock_irqsave(&nts->lock, flags);
		nt_set_state(nt, NETPOLL_TARGET_DISABLED);
		/* gone, not renamed: a renamed device is no device coming back */
		if (nt->resume && event != NETDEV_CHANGENAME) {
			nt->deactivated = true;
			waiting = true;
		}
		spin_unlock_irqrestore(&nts->lock, flags);

		netpoll_target_put(nt);
		stopped = true;
	}

	if (stopped)
		nts_info(nts, "network logging stopped on interface %s as it %s\n",
			 dev->name, nts_event_reason(event));
	if (waiting)
		nts_info(nts, "network logging resumes when %s is back\n", dev->name);

	return NOTIFY_DONE;
}

/**
 * netpoll_target_edit_begin - start changing a parameter of a target
 * @nt: the target
 *
 * Takes the configuration mutex.  Parameters change only while the target
 * is disabled.
 *
 * Return: 0 with the mutex held, or -EBUSY if the target is not disabled.
 */
int netpoll_target_edit_begin(struct netpoll_target *nt)
{
	struct netpoll_targets *nts = nt->nts;
	enum netpoll_target_state state;

	mutex_lock(&nts->mutex);
	state = nt_state(nt);
	if (state == NETPOLL_TARGET_DISABLED)
		return 0;

	if (state == NETPOLL_TARGET_ENABLED)
		nts_err(nts, "target (%s) is enabled, disable to update parameters\n",
			config_item_name(&nt->group.cg_item));
	mutex_unlock(&nts->mutex);
	return -EBUSY;
}
EXPORT_SYMBOL_GPL(netpoll_target_edit_begin);

/**
 * netpoll_target_edit_end - done changing the parameters of a target
 * @nt: the target, after a successful netpoll_target_edit_begin()
 */
void netpoll_target_edit_end(struct netpoll_target *nt)
{
	mutex_unlock(&nt->nts->mutex);
}
EXPORT_SYMBOL_GPL(netpoll_target_edit_end);

/* configfs.  The hierarchy is
 *
 * /sys/kernel/config/<subsystem>/
 *	<target>/
 *		enabled dev_name local_port remote_port local_ip remote_ip
 *		local_mac (read-only) remote_mac resume
 *		and the attributes of the subsystem
 */

/* Copy an attribute value without its trailing newline into @dst.
 * Returns its length, 0 for an empty value, or -E2BIG.
 */
static int nt_copy_value(const char *buf, size_t count, char *dst,
			 size_t size)
{
	size_t len = strnlen(buf, count);

	if (len && buf[len - 1] == '\n')
		len--;
	if (len >= size)
		return -E2BIG;
	memcpy(dst, buf, len);
	dst[len] = '\0';
	return len;
}

/* End the wait of a deactivated target; was it waiting? */
static bool nt_stop_waiting(struct netpoll_target *nt)
{
	unsigned long flags;
	bool was;

	spin_lock_irqsave(&nt->nts->lock, flags);
	was = nt->deactivated;
	nt->deactivated = false;
	spin_unlock_irqrestore(&nt->nts->lock, flags);
	return was;
}

/* Opt-in, off by default as in 6.1: resume when the interface is back */
static ssize_t nt_resume_show(struct config_item *item, char *buf)
{
	return sysfs_emit(buf, "%d\n", to_netpoll_target(item)->resume);
}

static ssize_t nt_resume_store(struct config_item *item, const char *buf,
			       size_t count)
{
	struct netpoll_target *nt = to_netpoll_target(item);
	unsigned long flags;
	bool resume;

	if (kstrtobool(buf, &resume))
		return -EINVAL;
	mutex_lock(&nt->nts->mutex);
	spin_lock_irqsave(&nt->nts->lock, flags);
	nt->resume = resume;
	if (!resume)
		nt->deactivated = false;
	spin_unlock_irqrestore(&nt->nts->lock, flags);
	mutex_unlock(&nt->nts->mutex);
	return strnlen(buf, count);
}

static ssize_t nt_enabled_show(struct config_item *item, char *buf)
{
	struct netpoll_target *nt = to_netpoll_target(item);

	return sysfs_emit(buf, "%d\n",
			  nt_state(nt) == NETPOLL_TARGET_ENABLED);
}

static int nt_configfs_enable(struct netpoll_target *nt)
{
	const struct netpoll_target_ops *ops = nt->nts->ops;
	int err;

	if (ops && ops->prepare_enable) {
		err = ops->prepare_enable(nt);
		if (err)
			return err;
	}

	/* The parameters were set one by one; show them all */
	netpoll_print_options(&nt->np);

	err = nt_enable(nt, true);
	if (err)
		return err;

	if (ops && ops->enabled)
		ops->enabled(nt);
	return 0;
}

/* Targets made through configfs start disabled, so that their parameters
 * can be set first.
 */
static ssize_t nt_enabled_store(struct config_item *item, const char *buf,
				size_t count)
{
	struct netpoll_target *nt = to_netpoll_target(item);
	struct netpoll_targets *nts = nt->nts;
	enum netpoll_target_state state;
	bool enabled, waiting;
	int enable;
	int err;

	if (kstrtoint(buf, 10, &enable) || enable < 0 || enable > 1)
		return -EINVAL;

	mutex_lock(&nts->mutex);
	state = nt_state(nt);
	if (state == NETPOLL_TARGET_SETTINGUP ||
	    state == NETPOLL_TARGET_CLEANING) {
		err = -EBUSY;
		goto out_unlock;
	}
	enabled = state == NETPOLL_TARGET_ENABLED;
	/* The user decides now: a target waiting to resume waits no more */
	waiting = nt_stop_waiting(nt);
	if (enable == enabled) {
		if (!enable && waiting) {
			err = 0;	/* stopped: it was to resume */
			goto out_unlock;
		}
		nts_info(nts, "network logging has already %s\n",
			 enable ? "started" : "stopped");
		err = -EINVAL;
		goto out_unlock;
	}

	if (enable) {
		err = nt_configfs_enable(nt);
	} else {
		nt_disable(nt);
		err = 0;
	}

out_unlock:
	mutex_unlock(&nts->mutex);
	return err ? err : strnlen(buf, count);
}

static ssize_t nt_dev_name_show(struct config_item *item, char *buf)
{
	struct netpoll_target *nt = to_netpoll_target(item);
	unsigned long flags;
	ssize_t ret;

	/* The notifier may be following a rename */
	spin_lock_irqsave(&nt->nts->lock, flags);
	ret = sysfs_emit(buf, "%s\n", nt->np.dev_name);
	spin_unlock_irqrestore(&nt->nts->lock, flags);

	return ret;
}

static ssize_t nt_dev_name_store(struct config_item *item, const char *buf,
				 size_t count)
{
	struct netpoll_target *nt = to_netpoll_target(item);
	char name[IFNAMSIZ];
	int len;
	int err;

	len = nt_copy_value(buf, count, name, sizeof(name));
	if (len < 0)
		return -ENAMETOOLONG;
	if (!len)
		return -EINVAL;

	err = netpoll_target_edit_begin(nt);
	if (err)
		return err;
	strscpy(nt->np.dev_name, name, IFNAMSIZ);
	netpoll_target_edit_end(nt);

	return strnlen(buf, count);
}

static ssize_t nt_port_store(struct netpoll_target *nt, u16 *port,
			     const char *buf, size_t count)
{
	u16 value;
	int err;

	err = netpoll_target_edit_begin(nt);
	if (err)
		return err;
	if (kstrtou16(buf, 10, &value))
		err = -EINVAL;
	else
		*port = value;
	netpoll_target_edit_end(nt);

	return err ? err : strnlen(buf, count);
}

static ssize_t nt_local_port_show(struct config_item *item, char *buf)
{
	return sysfs_emit(buf, "%u\n", to_netpoll_target(item)->np.local_port);
}

static ssize_t nt_local_port_store(struct config_item *item, const char *buf,
				   size_t count)
{
	struct netpoll_target *nt = to_netpoll_target(item);

	return nt_port_store(nt, &nt->np.local_port, buf, count);
}

static ssize_t nt_remote_port_show(struct config_item *item, char *buf)
{
	return sysfs_emit(buf, "%u\n", to_netpoll_target(item)->np.remote_port);
}

static ssize_t nt_remote_port_store(struct config_item *item, const char *buf,
				    size_t count)
{
	struct netpoll_target *nt = to_netpoll_target(item);

	return nt_port_store(nt, &nt->np.remote_port, buf, count);
}

static ssize_t nt_ip_show(struct netpoll_target *nt, union inet_addr *addr,
			  char *buf)
{
	if (nt->np.ipv6)
		return sysfs_emit(buf, "%pI6c\n", &addr->in6);
	return sysfs_emit(buf, "%pI4\n", &addr->ip);
}

/* An address with a colon is IPv6 and makes the target an IPv6 one.  Once
 * it is, IPv4 addresses are refused, as netconsole always did.
 */
static ssize_t nt_ip_store(struct netpoll_target *nt, union inet_addr *addr,
			   const char *buf, size_t count)
{
	struct netpoll_targets *nts = nt->nts;
	char str[NT_ADDR_STRLEN];
	union inet_addr parsed;
	const char *end;
	bool ipv6;
	int len;
	int err;

	err = netpoll_target_edit_begin(nt);
	if (err)
		return err;

	err = -EINVAL;
	len = nt_copy_value(buf, count, str, sizeof(str));
	if (len <= 0)
		goto out_end;

	memset(&parsed, 0, sizeof(parsed));
	ipv6 = !!strchr(str, ':');
	if (ipv6) {
		if (!in6_pton(str, len, parsed.in6.s6_addr, -1, &end))
			goto out_end;
		if (*end) {
			nts_err(nts, "invalid IPv6 address at: <%c>\n", *end);
			goto out_end;
		}
	} else {
		if (nt->np.ipv6)
			goto out_end;
		if (!in4_pton(str, len, (u8 *)&parsed.ip, -1, &end) || *end)
			goto out_end;
	}

	*addr = parsed;
	if (ipv6)
		nt->np.ipv6 = true;
	err = 0;

out_end:
	netpoll_target_edit_end(nt);
	return err ? err : strnlen(buf, count);
}

static ssize_t nt_local_ip_show(struct config_item *item, char *buf)
{
	struct netpoll_target *nt = to_netpoll_target(item);

	return nt_ip_show(nt, &nt->np.local_ip, buf);
}

static ssize_t nt_local_ip_store(struct config_item *item, const char *buf,
				 size_t count)
{
	struct netpoll_target *nt = to_netpoll_target(item);

	return nt_ip_store(nt, &nt->np.local_ip, buf, count);
}

static ssize_t nt_remote_ip_show(struct config_item *item, char *buf)
{
	struct netpoll_target *nt = to_netpoll_target(item);

	return nt_ip_show(nt, &nt->np.remote_ip, buf);
}

static ssize_t nt_remote_ip_store(struct config_item *item, const char *buf,
				  size_t count)
{
	struct netpoll_target *nt = to_netpoll_target(item);

	return nt_ip_store(nt, &nt->np.remote_ip, buf, count);
}

static ssize_t nt_local_mac_show(struct config_item *item, char *buf)
{
	struct netpoll_target *nt = to_netpoll_target(item);
	struct netpoll_targets *nts = nt->nts;
	unsigned long flags;
	u8 mac[ETH_ALEN];

	/* The device is ours only while the target is enabled */
	eth_broadcast_addr(mac);
	spin_lock_irqsave(&nts->lock, flags);
	if (nt->state == NETPOLL_TARGET_ENABLED)
		ether_addr_copy(mac, nt->np.dev->dev_addr);
	spin_unlock_irqrestore(&nts->lock, flags);

	return sysfs_emit(buf, "%pM\n", mac);
}

static ssize_t nt_remote_mac_show(struct config_item *item, char *buf)
{
	return sysfs_emit(buf, "%pM\n", to_netpoll_target(item)->np.remote_mac);
}

static ssize_t nt_remote_mac_store(struct config_item *item, const char *buf,
				   size_t count)
{
	struct netpoll_target *nt = to_netpoll_target(item);
	char str[3 * ETH_ALEN + 1];
	u8 mac[ETH_ALEN];
	int err;

	err = netpoll_target_edit_begin(nt);
	if (err)
		return err;
	if (nt_copy_value(buf, count, str, sizeof(str)) != 3 * ETH_ALEN - 1 ||
	    !mac_pton(str, mac))
		err = -EINVAL;
	else
		ether_addr_copy(nt->np.remote_mac, mac);
	netpoll_target_edit_end(nt);

	return err ? err : strnlen(buf, count);
}

CONFIGFS_ATTR(nt_, enabled);
CONFIGFS_ATTR(nt_, dev_name);
CONFIGFS_ATTR(nt_, local_port);
CONFIGFS_ATTR(nt_, remote_port);
CONFIGFS_ATTR(nt_, local_ip);
CONFIGFS_ATTR(nt_, remote_ip);
CONFIGFS_ATTR_RO(nt_, local_mac);
CONFIGFS_ATTR(nt_, remote_mac);
CONFIGFS_ATTR(nt_, resume);

static struct configfs_attribute *nt_common_attrs[] = {
	&nt_attr_enabled,
	&nt_attr_dev_name,
	&nt_attr_local_port,
	&nt_attr_remote_port,
	&nt_attr_local_ip,
	&nt_attr_remote_ip,
	&nt_attr_local_mac,
	&nt_attr_remote_mac,
	&nt_attr_resume,
	NULL,
};

static void nt_item_release(struct config_item *item)
{
	netpoll_target_put(to_netpoll_target(item));
}

static struct configfs_item_operations nt_item_ops = {
	.release	= nt_item_release,
};

static struct netpoll_targets *to_nts(struct config_group *group)
{
	return container_of(group, struct netpoll_targets, configfs_subsys.su_group);
}

/* A target directory is a group, so that a subsystem can give it groups
 * of its own (netconsole's userdata/).
 */
static struct config_group *nts_make_group(struct config_group *group,
					   const char *name)
{
	const struct netpoll_target_ops *ops;
	struct netpoll_targets *nts = to_nts(group);
	struct netpoll_target *nt;
	int err;

	nt = nt_alloc(nts);
	if (!nt)
		return ERR_PTR(-ENOMEM);

	config_group_init_type_name(&nt->group, name, &nts->target_type);
	ops = nts->ops;
	if (ops && ops->init_group) {
		err = ops->init_group(nt);
		if (err) {
			/* frees a long name too, then the target */
			config_item_put(&nt->group.cg_item);
			return ERR_PTR(err);
		}
	}
	nt_link(nt);

	return &nt->group;
}

static void nts_drop_item(struct config_group *group, struct config_item *item)
{
	struct netpoll_target *nt = to_netpoll_target(item);
	struct netpoll_targets *nts = nt->nts;

	/* Under RTNL nt_disable() waits for a notifier working on us */
	mutex_lock(&nts->mutex);
	nt_disable(nt);
	nt_unlink(nt);
	mutex_unlock(&nts->mutex);

	config_item_put(item);
}

static struct configfs_group_operations nts_group_ops = {
	.make_group	= nts_make_group,
	.drop_item	= nts_drop_item,
};

static int nts_init_configfs(struct netpoll_targets *nts, const char *name,
			     struct module *owner)
{
	const struct netpoll_target_ops *ops = nts->ops;
	struct configfs_attribute **extra;
	unsigned int n = 0;

	memset(nts->attrs, 0, sizeof(nts->attrs));
	for (extra = nt_common_attrs; *extra; extra++)
		nts->attrs[n++] = *extra;
	for (extra = ops ? ops->attrs : NULL; extra && *extra; extra++) {
		if (WARN_ON_ONCE(n >= NETPOLL_TARGETS_MAX_ATTRS))
			return -EINVAL;
		nts->attrs[n++] = *extra;
	}

	memset(&nts->target_type, 0, sizeof(nts->target_type));
	nts->target_type.ct_item_ops = &nt_item_ops;
	nts->target_type.ct_attrs = nts->attrs;
	nts->target_type.ct_owner = owner;

	memset(&nts->subsys_type, 0, sizeof(nts->subsys_type));
	nts->subsys_type.ct_group_ops = &nts_group_ops;
	nts->subsys_type.ct_owner = owner;

	memset(&nts->configfs_subsys, 0, sizeof(nts->configfs_subsys));
	config_group_init_type_name(&nts->configfs_subsys.su_group, name,
				    &nts->subsys_type);
	mutex_init(&nts->configfs_subsys.su_mutex);

	return 0;
}

/* Disable, unlink and free every target left.  Only targets from the
 * parameter string remain when this runs: configfs ones pin the module.
 */
static void nts_free_targets(struct netpoll_targets *nts)
{
	struct netpoll_target *nt, *next;

	mutex_lock(&nts->mutex);
	list_for_each_entry_safe(nt, next, &nts->list, list) {
		nt_disable(nt);
		nt_unlink(nt);
		netpoll_target_put(nt);
	}
	mutex_unlock(&nts->mutex);
}

/* One entry of the parameter string: [+][src-port]@[src-ip]/[dev],
 * [tgt-port]@<tgt-ip>/[tgt-macaddr], the prefix being the subsystem's.
 */
static int nts_add_param_target(struct netpoll_targets *nts, char *opt)
{
	const struct netpoll_target_ops *ops = nts->ops;
	struct netpoll_target *nt;
	int err;

	nt = nt_alloc(nts);
	if (!nt)
		return -ENOMEM;

	if (ops && ops->parse_prefix) {
		err = ops->parse_prefix(nt, &opt);
		if (err)
			goto out_put;
	}

	/* netpoll_parse_options() returns -1 and logs the reason */
	if (netpoll_parse_options(&nt->np, opt)) {
		err = -EINVAL;
		goto out_put;
	}

	nt_link(nt);
	err = nt_enable(nt, false);
	if (err)
		goto out_unlink;

	return 0;

out_unlink:
	nt_unlink(nt);
out_put:
	netpoll_target_put(nt);
	return err;
}

static int nts_add_param_targets(struct netpoll_targets *nts, char *params)
{
	int err = 0;
	char *opt;

	if (!params || !*params)
		return 0;

	mutex_lock(&nts->mutex);
	while (!err && (opt = strsep(&params, ";")))
		err = nts_add_param_target(nts, opt);
	mutex_unlock(&nts->mutex);

	return err;
}

/**
 * __register_netpoll_targets - create the targets of a subsystem
 * @nts: the set, with its public fields filled in
 * @name: subsystem name: configfs directory, netpoll name, log prefix
 * @params: parameter targets separated by ';', or NULL; modified
 * @owner: module that owns the configfs items
 * @key: lockdep class of @nts->lock
 *
 * Use register_netpoll_targets().
 *
 * Return: 0, or -errno with nothing left registered.
 */
int __register_netpoll_targets(struct netpoll_targets *nts, const char *name,
			       char *params, struct module *owner,
			       struct lock_class_key *key)
{
	int err;

	INIT_LIST_HEAD(&nts->list);
	spin_lock_init(&nts->lock);
	lockdep_set_class_and_name(&nts->lock, key, name);
	mutex_init(&nts->mutex);
	nts->subsys_name = name;

	err = nts_init_configfs(nts, name, owner);
	if (err)
		return err;

	INIT_WORK(&nts->resume_work, nts_resume_work);
	memset(&nts->netdev_notifier, 0, sizeof(nts->netdev_notifier));
	nts->netdev_notifier.notifier_call = nts_netdev_event;
	err = register_netdevice_notifier(&nts->netdev_notifier);
	if (err)
		return err;

	err = nts_add_param_targets(nts, params);
	if (err)
		goto out_free_targets;

	err = configfs_register_subsystem(&nts->configfs_subsys);
	if (err)
		goto out_free_targets;

	return 0;

out_free_targets:
	nts_stop_resuming(nts);
	unregister_netdevice_notifier(&nts->netdev_notifier);
	cancel_work_sync(&nts->resume_work);
	nts_free_targets(nts);
	return err;
}
EXPORT_SYMBOL_GPL(__register_netpoll_targets);

/**
 * unregister_netpoll_targets - remove the targets of a subsystem
 * @nts: a set registered with register_netpoll_targets()
 *
 * Removes the configfs directory, stops watching devices, then disables
 * and frees the parameter targets.  Senders must be gone already.
 */
void unregister_netpoll_targets(struct netpoll_targets *nts)
{
	configfs_unregister_subsystem(&nts->configfs_subsys);
	nts_stop_resuming(nts);
	/* This replays NETDEV_UNREGISTER for every device, which disables
	 * the remaining targets as netconsole has always done on unload.
	 */
	unregister_netdevice_notifier(&nts->netdev_notifier);
	/* No event schedules it any more; it takes nts->mutex */
	cancel_work_sync(&nts->resume_work);
	nts_free_targets(nts);
}
EXPORT_SYMBOL_GPL(unregister_netpoll_targets);

MODULE_LICENSE("GPL");
MODULE_VERSION(NETOOPS_MODULE_VERSION);
MODULE_DESCRIPTION("Netpoll targets shared by netconsole and netoops");
