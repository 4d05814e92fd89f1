-- SPDX-License-Identifier: GPL-2.0
--
-- Wireshark dissectors for what a dying Linux machine sends:
--
--   netoops     netoops v3 crash dumps (UDP 2004): every header field, the
--               CPU identity, struct pt_regs and the chunk of log text
--               (modules/netoops_wire.h; the collector's proto.py is the
--               same table);
--   netconsole  netconsole lines (UDP 6666): extended records
--               ("[<release>,]<level>,<seq>,<usec>,<flags>[,ncfrag=<off>/<len>];text",
--               then " KEY=value" lines: dictionary, userdata, sysdata)
--               and basic lines.
--
-- Install: copy to ~/.local/lib/wireshark/plugins/ (or the global
-- /usr/lib/x86_64-linux-gnu/wireshark/plugins/, where netoops-collector's
-- package puts it), or run tshark -X lua_script:netoops.lua.

-- netoops -------------------------------------------------------------------

local VERSION = 3
local PACKET_SIZE = 1412
local TYPES = { [1] = "oops or panic", [3] = "soft dump" }
local ARCHES = { [2] = "x86_64" }
local VENDORS = {
	[0] = "Intel", [1] = "Cyrix", [2] = "AMD", [3] = "UMC", [5] = "Centaur",
	[7] = "Transmeta", [8] = "NSC", [9] = "Hygon", [10] = "Zhaoxin",
	[11] = "Vortex", [255] = "unknown",
}
-- struct pt_regs on x86_64, in memory order
local REGS = {
	"r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8",
	"rax", "rcx", "rdx", "rsi", "rdi", "orig_rax", "rip", "cs", "eflags",
	"rsp", "ss",
}

-- { name, offset, size, ProtoField } in packet order; offsets from the C
-- header (216-byte header, 172-byte x86 block, 1024 bytes of log).
local netoops = Proto("netoops", "netoops crash dump (v3)")
local F = {}
local layout = {}

local function field(name, offset, size, pf)
	F[name] = pf
	layout[#layout + 1] = { name = name, offset = offset, size = size }
end

field("version", 0, 2, ProtoField.uint16("netoops.version", "Version"))
field("dump_id", 2, 2, ProtoField.uint16("netoops.dump_id", "Dump id"))
field("data_offset", 4, 2, ProtoField.uint16("netoops.data_offset", "Data offset"))
field("arch", 6, 2, ProtoField.uint16("netoops.arch", "Architecture", base.DEC, ARCHES))
field("arch_offset", 8, 2, ProtoField.uint16("netoops.arch_offset", "Architecture block offset"))
field("type", 10, 2, ProtoField.uint16("netoops.type", "Type", base.DEC, TYPES))
field("packet_count", 12, 4, ProtoField.uint32("netoops.packet_count", "Packet count"))
field("packet_no", 16, 4, ProtoField.uint32("netoops.packet_no", "Packet number"))
field("boot_id", 20, 4, ProtoField.uint32("netoops.boot_id", "Boot id"))
field("kernel_version", 24, 64, ProtoField.string("netoops.kernel_version", "Kernel version"))
field("user_blob", 88, 128, ProtoField.string("netoops.user_blob", "User blob"))
field("x86_vendor", 216, 1, ProtoField.uint8("netoops.x86_vendor", "CPU vendor", base.DEC, VENDORS))
field("x86_family", 217, 1, ProtoField.uint8("netoops.x86_family", "CPU family"))
field("x86_model", 218, 1, ProtoField.uint8("netoops.x86_model", "CPU model"))
field("x86_stepping", 219, 1, ProtoField.uint8("netoops.x86_stepping", "CPU stepping"))
for i, reg in ipairs(REGS) do
	field(reg, 220 + (i - 1) * 8, 8,
	      ProtoField.uint64("netoops.reg." .. reg, reg, base.HEX))
end
field("data", 388, 1024, ProtoField.string("netoops.data", "Log chunk"))

local f_regs = ProtoField.none("netoops.regs", "Registers (struct pt_regs)")
local f_x86 = ProtoField.none("netoops.x86", "x86 block")
local e_bad = ProtoExpert.new("netoops.malformed", "Not a netoops v3 packet",
			      expert.group.MALFORMED, expert.severity.ERROR)
local e_zero = ProtoExpert.new("netoops.no_fault", "No fault registers (a panic without an oops, or a soft dump)",
			       expert.group.COMMENTS_GROUP, expert.severity.NOTE)
local pfs = { f_regs, f_x86 }
for _, l in ipairs(layout) do
	pfs[#pfs + 1] = F[l.name]
end
netoops.fields = pfs
netoops.experts = { e_bad, e_zero }

-- A NUL-padded field, not necessarily NUL-terminated (the log chunk is
-- full but for the last one), as text.
local function cstring(range)
	local raw = range:raw()
	local nul = raw:find("\0", 1, true)
	return nul and raw:sub(1, nul - 1) or raw
end

local function add(tree, buf, l)
	local range = buf(l.offset, l.size)
	if l.name == "kernel_version" or l.name == "user_blob" or l.name == "data" then
		return tree:add(F[l.name], range, cstring(range))
	end
	return tree:add_le(F[l.name], range)
end

function netoops.dissector(buf, pinfo, tree)
	local len = buf:len()
	if len < 24 then
		return 0
	end
	pinfo.cols.protocol = "netoops"
	local root = tree:add(netoops, buf(), "netoops crash dump")
	local version = buf(0, 2):le_uint()
	if len ~= PACKET_SIZE or version ~= VERSION then
		root:add_proto_expert_info(e_bad, string.format(
			"Not a netoops v3 packet: %d bytes, version %d (v3: %d bytes)",
			len, version, PACKET_SIZE))
		return len
	end
	local x86, regs
	local zero = true
	for _, l in ipairs(layout) do
		if l.offset == 216 then
			x86 = root:add(f_x86, buf(216, 172))
		end
		if l.offset == 220 then
			regs = x86:add(f_regs, buf(220, 168))
		end
		local parent = regs or x86 or root
		if l.name == "data" then
			parent = root
		end
		add(parent, buf, l)
		if regs and l.name ~= "data" and buf(l.offset, l.size):le_uint64() ~= UInt64(0) then
			zero = false
		end
	end
	if zero then
		regs:add_proto_expert_info(e_zero)
	end
	local kind = TYPES[buf(10, 2):le_uint()] or "?"
	pinfo.cols.info = string.format("boot %u dump %u: packet %u of %u, %s, %s",
		buf(20, 4):le_uint(), buf(2, 2):le_uint(), buf(16, 4):le_uint(),
		buf(12, 4):le_uint(), kind, cstring(buf(24, 64)))
	root:append_text(string.format(", packet %u of %u", buf(16, 4):le_uint(),
		buf(12, 4):le_uint()))
	return len
end

DissectorTable.get("udp.port"):add(2004, netoops)

-- netconsole ----------------------------------------------------------------

local netconsole = Proto("netconsole", "netconsole")
local NF = {
	text = ProtoField.string("netconsole.text", "Text"),
	extended = ProtoField.bool("netconsole.extended", "Extended record"),
	level = ProtoField.uint8("netconsole.level", "Level (facility*8+severity)"),
	seq = ProtoField.uint64("netconsole.seq", "Sequence number"),
	usec = ProtoField.uint64("netconsole.usec", "Timestamp (us since boot)"),
	flags = ProtoField.string("netconsole.flags", "Flags"),
	frag_off = ProtoField.uint32("netconsole.ncfrag.offset", "Fragment offset"),
	frag_len = ProtoField.uint32("netconsole.ncfrag.length", "Message length"),
	kv = ProtoField.string("netconsole.kv", "Key=value"),
	key = ProtoField.string("netconsole.key", "Key"),
	value = ProtoField.string("netconsole.value", "Value"),
	release = ProtoField.string("netconsole.release", "Kernel release"),
}
netconsole.fields = { NF.text, NF.extended, NF.level, NF.seq, NF.usec, NF.flags,
		      NF.frag_off, NF.frag_len, NF.kv, NF.key, NF.value, NF.release }

function netconsole.dissector(buf, pinfo, tree)
	local len = buf:len()
	if len == 0 then
		return 0
	end
	pinfo.cols.protocol = "netconsole"
	local s = buf():raw()
	local root = tree:add(netconsole, buf())
	-- "[<release>,]<level>,<seq>,<usec>,<flags>[,more];": an extended
	-- record (the release first with the target's r flag, 6.6)
	local prefix = s:match("^%d+,%d+,%d+,[^;\n]*;")
	local release = nil
	if not prefix then
		release = s:match("^([^,;%s]+),%d+,%d+,%d+,[^;\n]*;")
		if release then
			prefix = s:match("^[^,;%s]+,%d+,%d+,%d+,[^;\n]*;")
		end
	end
	if not prefix then
		local text = s:gsub("\n$", "")
		root:add(NF.extended, buf(0, 0), false)
		root:add(NF.text, buf(0, #text), text)
		pinfo.cols.info = text
		return len
	end
	root:add(NF.extended, buf(0, 0), true)
	local pos = 0
	if release then
		root:add(NF.release, buf(0, #release), release)
		pos = #release + 1
	end
	local level, seq, usec, rest = prefix:sub(pos + 1):match("^(%d+),(%d+),(%d+),([^;]*);$")
	local function item(f, str, value)
		local i = s:find(str, pos + 1, true)
		root:add(f, buf(i - 1, #str), value)
		pos = i - 1 + #str
	end
	item(NF.level, level, tonumber(level))
	item(NF.seq, seq, UInt64(tonumber(seq)))
	item(NF.usec, usec, UInt64(tonumber(usec)))
	local flags = rest:match("^([^,]*)") or ""
	root:add(NF.flags, buf(pos + 1, #flags), flags)
	local off, total = rest:match("ncfrag=(%d+)/(%d+)")
	if off then
		local i = s:find("ncfrag=", 1, true)
		root:add(NF.frag_off, buf(i - 1, #prefix - i), tonumber(off))
		root:add(NF.frag_len, buf(i - 1, #prefix - i), tonumber(total))
	end
	local body_start = #prefix
	local nl = s:find("\n", body_start + 1, true) or (len + 1)
	local text = s:sub(body_start + 1, nl - 1)
	root:add(NF.text, buf(body_start, nl - 1 - body_start), text)
	-- " KEY=value" lines after the text: the record's dictionary, and
	-- upstream's userdata and sysdata (cpu=, taskname=, release=, msgid=)
	local at = nl
	while at <= len do
		local next_nl = s:find("\n", at + 1, true) or (len + 1)
		local line = s:sub(at + 1, next_nl - 1)
		local lead = line:sub(1, 1) == " " and 1 or 0
		line = line:sub(lead + 1)
		if #line > 0 then
			local start = at + lead		-- 0-based offset of the line
			local k, v = line:match("^([^=]+)=(.*)$")
			local t = root:add(NF.kv, buf(start, #line), line)
			if k then
				t:add(NF.key, buf(start, #k), k)
				t:add(NF.value, buf(start + #k + 1, #v), v)
			end
		end
		at = next_nl
	end
	pinfo.cols.info = string.format("<%s> seq %s [%s] %s", level, seq,
		string.format("%d.%06d", math.floor(tonumber(usec) / 1000000),
			      tonumber(usec) % 1000000), text)
	return len
end

DissectorTable.get("udp.port"):add(6666, netconsole)
