# SPDX-License-Identifier: GPL-2.0
# Not a test: `busybox uevent sh /tests/alias_uevent.sh` runs it for every
# uevent with the uevent's variables in the environment.  It appends one line
# to /tmp/uevents per block uevent ("change sda1 ALIAS=foo", "ALIAS=" for an
# empty value, "no-ALIAS" without the variable) and per marker uevent that
# alias_lib.sh sends ("phase NAME").
if [ -n "$SYNTH_ARG_PHASE" ]; then
	echo "phase $SYNTH_ARG_PHASE" >>/tmp/uevents
elif [ "$SUBSYSTEM" = block ]; then
	if [ "${ALIAS+set}" = set ]; then
		a="ALIAS=$ALIAS"
	else
		a=no-ALIAS
	fi
	echo "$ACTION $DEVNAME $a" >>/tmp/uevents
fi
