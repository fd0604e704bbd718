#!/usr/bin/env bash
# slowdisk.sh runs a command against a real disk with few write IOPS, and
# tears the disk down afterwards (docs/usage-events.md "Measured on a
# throttled disk"):
#
#   a file → a loop device → ext4, mounted in a temporary directory;
#   a blkio cgroup (v1) with blkio.throttle.write_iops_device "MAJ:MIN 20";
#   the command runs inside that cgroup, with SCOOTGATE_SLOWDISK set to a
#   directory on the throttled disk.
#
# Usage, as root on a host with cgroup v1 blkio at /sys/fs/cgroup/blkio:
#
#   scripts/slowdisk.sh                       # TestSlowDisk: the outbox at 1,000 events/s for 60 s
#   scripts/slowdisk.sh go test -count=1 -run '^TestSlowDisk$' -v ./internal/outbox
#   SLOWDISK_IOPS=10 scripts/slowdisk.sh ...  # another limit (default 20)
#
# cgroup v1 throttles only the I/O that is attributed to the cgroup: writes
# a process in it submits itself (O_DSYNC writes, the writeback fsync and
# fdatasync start), not the page cache's background writeback nor ext4's
# journal commits (kernel threads in the root cgroup). Before the command
# runs, the script checks that the throttle bites: 40 O_DSYNC 4 KiB writes
# from inside the cgroup must not go faster than the limit allows. A
# device-mapper delay target would delay every write, but needs dm-delay in
# the kernel, which the development VM does not have.
set -euo pipefail

readonly IOPS=${SLOWDISK_IOPS:-20}
readonly SIZE=${SLOWDISK_SIZE:-1G}
readonly BLKIO=/sys/fs/cgroup/blkio

log() { printf 'slowdisk: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[[ $(id -u) == 0 ]] || die "needs root (loop devices, mount, cgroups)"
[[ -f $BLKIO/cgroup.procs ]] || die "no cgroup v1 blkio hierarchy at $BLKIO"
command -v losetup >/dev/null && command -v mkfs.ext4 >/dev/null || die "needs losetup and mkfs.ext4"

work=$(mktemp -d /tmp/scootgate-slowdisk.XXXXXX)
loop=""
cg=""
teardown() {
	set +e
	mountpoint -q "$work/mnt" && umount "$work/mnt"
	[[ -n $loop ]] && losetup -d "$loop"
	[[ -n $cg && -d $cg ]] && rmdir "$cg"
	rm -rf "$work"
}
trap teardown EXIT

truncate -s "$SIZE" "$work/disk.img"
loop=$(losetup --find --show "$work/disk.img")
mkfs.ext4 -q -F "$loop"
mkdir "$work/mnt"
mount "$loop" "$work/mnt"
dev=$(cat "/sys/block/$(basename "$loop")/dev")

cg=$BLKIO/scootgate-slowdisk-$$
mkdir "$cg"
echo "$dev $IOPS" >"$cg/blkio.throttle.write_iops_device"
log "$loop ($dev) on $work/mnt, writes throttled to $IOPS IOPS in $cg"

# in_cgroup runs its arguments inside the throttled cgroup.
in_cgroup() { sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$@"; }

# The throttle must bite, or the measurement is of a fast disk.
start=$(date +%s.%N)
in_cgroup dd if=/dev/zero of="$work/mnt/probe" bs=4k count=40 oflag=dsync status=none
end=$(date +%s.%N)
rm -f "$work/mnt/probe"
rate=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", 40 / (e - s) }')
log "probe: 40 O_DSYNC 4 KiB writes at $rate/s from inside the cgroup"
awk -v r="$rate" -v l="$IOPS" 'BEGIN { exit !(r <= 1.5 * l) }' || die "the throttle does not bite ($rate/s, limit $IOPS)"

if (($# == 0)); then
	set -- go test -count=1 -run '^TestSlowDisk$' -v ./internal/outbox
fi
status=0
SCOOTGATE_SLOWDISK=$work/mnt in_cgroup "$@" || status=$?
writes=$(awk -v d="$dev" '$1 == d && $2 == "Write" { print $3 }' "$cg/blkio.throttle.io_serviced")
bytes=$(awk -v d="$dev" '$1 == d && $2 == "Write" { print $3 }' "$cg/blkio.throttle.io_service_bytes")
log "written from the cgroup, probe included: ${writes:-0} writes, ${bytes:-0} bytes"
exit "$status"
