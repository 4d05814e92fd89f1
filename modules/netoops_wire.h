/* SPDX-License-Identifier: GPL-2.0 */
/*
 * netoops v3 wire format (x86_64).  Every field is little-endian and the
 * structures are packed: the UDP payload is exactly 1412 bytes.  The offsets
 * are checked at build time in netoops.c and against the collector's field
 * table by a host test.
 */
#ifndef _NETOOPS_WIRE_H
#define _NETOOPS_WIRE_H

#include <linux/types.h>
#include <asm/ptrace.h>

#define NETOOPS_VERSION			0x0003
#define NETOOPS_PORT			2004
#define NETOOPS_TYPE_PRINTK_BUFFER	1
#define NETOOPS_TYPE_PRINTK_BUFFER_SOFT	3
#define NETOOPS_ARCH_X86		2
#define NETOOPS_RETRANSMIT_COUNT	3
#define NETOOPS_DATA_BYTES		1024
#define NETOOPS_KVER_BYTES		64
#define NETOOPS_BLOB_BYTES		128

/**
 * struct netoops_msg_header - the architecture-independent header
 * @version: NETOOPS_VERSION; must stay at offset 0
 * @dump_id: differs between two dumps of one boot
 * @data_offset: offset of @data in the packet
 * @arch: NETOOPS_ARCH_X86
 * @arch_offset: offset of the architecture block in the packet
 * @type: NETOOPS_TYPE_PRINTK_BUFFER or NETOOPS_TYPE_PRINTK_BUFFER_SOFT
 * @packet_count: packets in this dump (one copy)
 * @packet_no: 0 is the newest chunk of the log
 * @boot_id: set by userspace through sysfs
 * @kernel_version: utsname release, NUL padded
 * @user_blob: set by userspace through sysfs, NUL padded
 */
struct netoops_msg_header {
	__le16 version;
	__le16 dump_id;
	__le16 data_offset;
	__le16 arch;
	__le16 arch_offset;
	__le16 type;
	__le32 packet_count;
	__le32 packet_no;
	__le32 boot_id;
	char kernel_version[NETOOPS_KVER_BYTES];
	char user_blob[NETOOPS_BLOB_BYTES];
} __packed;

/**
 * struct netoops_arch_data - x86 CPU identity and the registers of the fault
 * @x86_vendor: X86_VENDOR_* code
 * @x86_family: CPU family
 * @x86_model: CPU model
 * @x86_stepping: CPU stepping
 * @regs: struct pt_regs (168 bytes on x86_64), native little-endian: the
 *	registers of the oops, for an oops dump and for the dump of the panic
 *	that ends an oops; all zero when the dump has no fault (a plain panic
 *	such as sysrq c, NMI, hung task or soft lockup, and every soft dump).
 *	They never describe netoops itself.
 */
struct netoops_arch_data {
	u8 x86_vendor;
	u8 x86_family;
	u8 x86_model;
	u8 x86_stepping;
	struct pt_regs regs;
} __packed;

/**
 * struct netoops_msg - one UDP payload
 * @header: see struct netoops_msg_header
 * @arch_data: see struct netoops_arch_data
 * @data: one chunk of the log, NUL padded.  The log is the text that
 *	syslog(2) reads: each record as "<N>[seconds.micros] text\n", N the
 *	syslog priority (facility * 8 + level), so KERN_EMERG lines are <0>.
 */
struct netoops_msg {
	struct netoops_msg_header header;
	struct netoops_arch_data arch_data;
	char data[NETOOPS_DATA_BYTES];
} __packed;

#endif /* _NETOOPS_WIRE_H */
