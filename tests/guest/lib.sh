# SPDX-License-Identifier: GPL-2.0
# Guest-side helpers; a guest script starts with `. /tests/lib.sh`.
#
#   result KEY VALUE...   report a line on the result port (/dev/ttyS1)
#   fail MESSAGE          report "fail MESSAGE" and exit 1
#   check DESC CMD...     run CMD; on failure report and exit 1
#   arg NAME [DEFAULT]    value of nto.NAME= on the kernel command line
#   kmod NAME [PARAMS]    insmod /lib/modules/nto/NAME.ko
#   refmod NAME [PARAMS]  insmod the in-tree /lib/modules/ref/NAME.ko
#   expect_errno ERR CMD  run CMD (a write), require it to fail with ERR text

result() {
	echo "$*" >/dev/ttyS1
}

fail() {
	result "fail $*"
	echo "FAIL: $*" >&2
	exit 1
}

check() {
	desc=$1
	shift
	"$@" || fail "$desc"
}

arg() {
	for w in $(cat /proc/cmdline); do
		case $w in
		nto.$1=*) echo "${w#nto.$1=}"; return 0 ;;
		esac
	done
	echo "$2"
}

kmod() {
	m=$1
	shift
	insmod "/lib/modules/nto/$m.ko" "$@" || fail "insmod $m $*"
}

refmod() {
	m=$1
	shift
	insmod "/lib/modules/ref/$m.ko" "$@" || fail "insmod ref $m $*"
}

# expect_errno "Invalid argument" sh -c 'echo 70000 > local_port'
expect_errno() {
	want=$1
	shift
	if out=$("$@" 2>&1); then
		fail "'$*' succeeded, wanted '$want'"
	fi
	case $out in
	*"$want"*) ;;
	*) fail "'$*' said '$out', wanted '$want'" ;;
	esac
}
