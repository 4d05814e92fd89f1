/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The version of the netoops modules, as modinfo shows it.  DKMS installs a
 * module in place of the kernel's own one of the same name (netconsole.ko)
 * only when it carries a version; keep it equal to PACKAGE_VERSION in
 * dkms.conf and the version in debian/changelog (tests/test_packages.py).
 */
#ifndef _NETOOPS_VERSION_H
#define _NETOOPS_VERSION_H

#define NETOOPS_MODULE_VERSION "1.1"

#endif /* _NETOOPS_VERSION_H */
