/* SPDX-License-Identifier: GPL-2.0 */
/*
 * netpoll targets: the target handling that netconsole and netoops share.
 *
 * A subsystem owns one struct netpoll_targets.  Its targets come from a
 * module parameter in netconsole's syntax and from configfs, under
 * /sys/kernel/config/<subsystem>/<target>/.  The layer tracks the network
 * device of every enabled target and disables the target when the device
 * goes away.  Senders walk the list under the targets lock with interrupts
 * off and transmit to each target for which netpoll_target_enabled() holds.
 */
#ifndef _NETPOLL_TARGETS_H
#define _NETPOLL_TARGETS_H

#include <linux/configfs.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/lockdep.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/netpoll.h>
#include <linux/notifier.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/workqueue.h>

/* Room for the nine common attributes and the subsystem's own ones */
#define NETPOLL_TARGETS_MAX_ATTRS	16

/**
 * enum netpoll_target_state - life cycle of a target's netpoll
 * @NETPOLL_TARGET_DISABLED: no netpoll; parameters may change
 * @NETPOLL_TARGET_SETTINGUP: netpoll being set up; not used for sending
 * @NETPOLL_TARGET_ENABLED: netpoll up; senders transmit to the target
 * @NETPOLL_TARGET_CLEANING: netpoll being torn down; not used for sending
 *
 * The only transitions are DISABLED -> SETTINGUP -> ENABLED or DISABLED,
 * and ENABLED -> CLEANING -> DISABLED.  A target leaves CLEANING before its
 * cleaner releases RTNL.
 */
enum netpoll_target_state {
	NETPOLL_TARGET_DISABLED,
	NETPOLL_TARGET_SETTINGUP,
	NETPOLL_TARGET_ENABLED,
	NETPOLL_TARGET_CLEANING,
};

struct netpoll_targets;

/**
 * struct netpoll_target - one destination of a subsystem
 * @nts: the set this target belongs to
 * @list: links the target into @nts->list, under @nts->lock
 * @group: the configfs directory; unnamed for targets given as a parameter
 * @kref: lifetime; the memory is freed when the last reference goes
 * @state: see enum netpoll_target_state; written under @nts->lock
 * @flags: free for the subsystem, as bits (netconsole keeps "extended"
 *	here; netoops changes its bits with set_bit() and friends)
 * @priv: free for the subsystem (netconsole's userdata); see
 *	&netpoll_target_ops.init_group and .free_target
 * @resume: opt-in: when the device of the enabled target goes away (it is
 *	unregistered, or joins or leaves a master), enable the target again
 *	once a device of that name in the initial network namespace is up
 *	and has no master (netpoll_setup() opens it if it went down again
 *	meanwhile).  Written under @nts->mutex and @nts->lock; a subsystem
 *	may set it on a parameter target before the target is enabled (in
 *	&netpoll_target_ops.parse_prefix).
 * @deactivated: the device went away while @resume was set, and the
 *	target waits for it.  Written under @nts->lock.
 * @resume_gen: the last run of the resume work that tried the target
 * @np: the netpoll: addresses, ports and device of the target.  Its
 *	parameters change only while the target is disabled, and @np.dev
 *	is valid whenever the target is enabled.
 */
struct netpoll_target {
	struct netpoll_targets	*nts;
	struct list_head	list;
	struct config_group	group;
	struct kref		kref;
	enum netpoll_target_state state;
	unsigned long		flags;
	void			*priv;
	bool			resume;
	bool			deactivated;
	u32			resume_gen;
	struct netpoll		np;
};

/**
 * struct netpoll_target_ops - optional hooks of a subsystem
 * @attrs: NULL-terminated configfs attributes added to every target.
 *	Their store methods bracket changes with netpoll_target_edit_begin()
 *	and netpoll_target_edit_end().
 * @parse_prefix: consumes a per-target prefix of a parameter entry (such
 *	as netconsole's '+') by advancing *@opt.  Returns 0 or -errno.
 * @prepare_enable: called before the netpoll of @nt is set up, in process
 *	context with the configuration mutex held.  An error aborts the
 *	enabling.  Not called for parameter targets.
 * @enabled: called once @nt has been enabled from configfs or resumed
 *	(see &netpoll_target.resume), in process context with the
 *	configuration mutex held.
 * @init_group: called when a target directory is made in configfs, before
 *	the target is on the list: may set @nt->priv and add default groups
 *	to @nt->group.  An error fails the mkdir (and free_target runs).
 * @free_target: called when the last reference to @nt goes, to free what
 *	init_group set up; @nt->priv is NULL for a parameter target.
 */
struct netpoll_target_ops {
	struct configfs_attribute **attrs;
	int (*parse_prefix)(struct netpoll_target *nt, char **opt);
	int (*prepare_enable)(struct netpoll_target *nt);
	void (*enabled)(struct netpoll_target *nt);
	int (*init_group)(struct netpoll_target *nt);
	void (*free_target)(struct netpoll_target *nt);
};

/* A renamed device keeps its targets, which follow the new name (what
 * netconsole has always done); without the flag the targets are disabled.
 */
#define NETPOLL_TARGETS_FOLLOW_RENAME	BIT(0)

/**
 * struct netpoll_targets - the targets of one subsystem
 * @list: every target, enabled or not
 * @lock: protects @list and the state of the targets.  Senders hold it,
 *	with interrupts off, while they walk @list and transmit.
 * @default_local_port: local UDP port of a new target
 * @default_remote_port: remote UDP port of a new target
 * @subsys_name: configfs directory, netpoll name and log prefix
 * @flags: NETPOLL_TARGETS_* behaviour flags
 * @ops: optional hooks; may be NULL
 * @mutex: serialises configuration changes; private
 * @netdev_notifier: watches the devices of enabled targets; private
 * @resume_work: enables deactivated targets whose device is back; private
 * @resume_gen: counts the runs of @resume_work; private
 * @configfs_subsys: the configfs subsystem; private
 * @subsys_type: item type of the subsystem directory; private
 * @target_type: item type of a target directory; private
 * @attrs: attributes of a target directory; private
 *
 * The subsystem fills in the public fields before it registers the set.
 */
struct netpoll_targets {
	struct list_head	list;
	spinlock_t		lock;	/* list and target states; senders */
	u16			default_local_port;
	u16			default_remote_port;
	const char		*subsys_name;
	unsigned long		flags;
	const struct netpoll_target_ops *ops;

	struct mutex		mutex;	/* configuration changes */
	struct notifier_block	netdev_notifier;
	struct work_struct	resume_work;
	u32			resume_gen;
	struct configfs_subsystem configfs_subsys;
	struct config_item_type	subsys_type;
	struct config_item_type	target_type;
	struct configfs_attribute *attrs[NETPOLL_TARGETS_MAX_ATTRS + 1];
};

int __register_netpoll_targets(struct netpoll_targets *nts, const char *name,
			       char *params, struct module *owner,
			       struct lock_class_key *key);

/**
 * register_netpoll_targets - create the targets of a subsystem
 * @nts: the set, with its public fields filled in
 * @name: subsystem name: configfs directory and netpoll name
 * @params: parameter targets, in netconsole's syntax and separated by ';',
 *	or NULL.  The string is modified.
 *
 * Sets up every parameter target (all of them or none), then creates the
 * configfs directory.  The calling module owns the configfs items, so it
 * cannot be unloaded while a configfs target exists.  Each call site gets
 * a lockdep class of its own for @nts->lock.
 *
 * Return: 0 or -errno.
 */
#define register_netpoll_targets(nts, name, params)			\
({									\
	static struct lock_class_key __nts_lock_key;			\
									\
	__register_netpoll_targets(nts, name, params, THIS_MODULE,	\
				   &__nts_lock_key);			\
})

void unregister_netpoll_targets(struct netpoll_targets *nts);

void netpoll_target_get(struct netpoll_target *nt);
void netpoll_target_put(struct netpoll_target *nt);

int netpoll_target_edit_begin(struct netpoll_target *nt);
void netpoll_target_edit_end(struct netpoll_target *nt);

/**
 * to_netpoll_target - the target of a configfs item
 * @item: an item of a netpoll targets subsystem
 *
 * Return: the target that embeds @item.
 */
static inline struct netpoll_target *to_netpoll_target(struct config_item *item)
{
	return container_of(to_config_group(item), struct netpoll_target, group);
}

/**
 * netpoll_target_enabled - may a sender use this target?
 * @nt: a target on the list, with its set's lock held
 *
 * Return: true if the netpoll of @nt is set up.
 */
static inline bool netpoll_target_enabled(const struct netpoll_target *nt)
{
	return nt->state == NETPOLL_TARGET_ENABLED;
}

/**
 * netpoll_targets_for_each - walk the targets of a set
 * @nt: the loop cursor, a struct netpoll_target *
 * @nts: the set, whose lock the caller holds
 */
#define netpoll_targets_for_each(nt, nts)				\
	list_for_each_entry(nt, &(nts)->list, list)

#endif /* _NETPOLL_TARGETS_H */
