# OpenStack ironic-python-agent, ironic_python_agent/raid_utils.py
# (create_raid_device: "mdadm --create MD --force --run --metadata=1 --level L
# --name NAME --raid-devices N PARTS", NAME defaulting to the md device;
# the ESPs: "--metadata=1.0 --level 1" on /dev/md/esp; md_get_raid_devices:
# "mdadm --examine --scan") and hardware.py (the component check with
# --detail, delete_configuration: --stop, --remove, --examine and
# --zero-superblock of each component; md_restart: --stop, --assemble).
mdadm --create /dev/md0 --force --run --metadata=1 --level 1 --name /dev/md0 --raid-devices 2 $dev0 $dev1
mdadm --create /dev/md/esp --force --run --metadata=1.0 --level 1 --raid-devices 2 $dev2 $dev3
settle /dev/md0
settle /dev/md/esp
mdadm --detail /dev/md0
mdadm --examine --scan
mdadm --stop /dev/md/esp
mdadm --assemble /dev/md/esp $dev2 $dev3
settle /dev/md/esp
mdadm --stop /dev/md0
mdadm --remove /dev/md0
mdadm --examine $dev0
mdadm --zero-superblock $dev0
mdadm --zero-superblock $dev1
mdadm --stop /dev/md/esp
# udev removes the /dev/md/esp link at the stop; the oracle VM has no udev
# (mdadm would otherwise say "/dev/md/esp exists - ignoring" and use
# /dev/md127): the link is removed when its array is not running.
if [ -L /dev/md/esp ]; then
	l=$(readlink /dev/md/esp)
	case "$(cat /sys/block/${l##*/}/md/array_state 2>/dev/null)" in
	clean | active | active-idle | readonly | read-auto) ;;
	*) rm -f /dev/md/esp ;;
	esac
fi
mdadm --assemble --scan
mdadm --examine --scan
