#!/bin/busybox sh
# /init of netqual's guest initramfs (netqual/vm/initramfs.py builds it).
# Loads the virtio/9p/overlay modules listed in /modules.order, mounts the host's root
# read-only over virtio-9p with a tmpfs overlay on top (so the guest runs the host's own
# Python, venv and rdma-core), bind-mounts the unpacked kernel's modules, mounts the
# results share, runs the script named on the kernel command line in that root, writes its
# exit status next to the results and powers off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

say() { echo "netqual-guest: $*" > /dev/console; }
die() { say "$*"; echo o > /proc/sysrq-trigger; sleep 5; poweroff -f; }

for arg in $(cat /proc/cmdline); do
  case "$arg" in
    netqual.modules=*) MODULES=${arg#netqual.modules=} ;;
    netqual.out=*) OUT=${arg#netqual.out=} ;;
    netqual.run=*) RUN=${arg#netqual.run=} ;;
  esac
done
[ -n "$MODULES" ] && [ -n "$OUT" ] && [ -n "$RUN" ] || die "missing netqual.* on the command line"

while read -r ko; do
  insmod "/$ko" || die "insmod $ko failed"
done < /modules.order

P9="trans=virtio,version=9p2000.L,msize=262144"
mkdir -p /host /rw /newroot
mount -t 9p -o "$P9,cache=loose,ro" hostroot /host || die "cannot mount the host root"
mount -t tmpfs -o mode=0755 tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work /newroot \
  || die "cannot mount the overlay"
R=/newroot
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts devpts $R/dev/pts
mount -t tmpfs tmpfs $R/dev/shm
mount -t tmpfs tmpfs $R/run
# /tmp stays the overlay's (writes land in the tmpfs upper): a checkout or venv under the
# host's /tmp, as CI clones can be, must stay visible to the guest.
RELEASE=$(uname -r)
mkdir -p "$R/lib/modules/$RELEASE" "$R$OUT"
mount --bind "/host$MODULES" "$R/lib/modules/$RELEASE" || die "cannot bind the modules"
mount -t 9p -o "$P9" results "$R$OUT" || die "cannot mount the results share"
# Kernel module auto-loading runs this path in the initramfs root: hand it to the new root.
echo /bin/modprobe-newroot > /proc/sys/kernel/modprobe
hostname netqual-guest

# The guest's clock against its RTC, which qemu ticks with the host's clock: under TCG the
# TSC is the host's, and on a loaded host the kernel's early calibration of it (against
# emulated PIT and HPET) came out ~7x off in about one boot in nine; a refined value that
# disagrees by more than 1% is thrown away, so the clock stayed 7x fast and every timeout
# in the guest 7x short. Guest seconds across 3 RTC seconds go to the results share; the
# host (netqual/vm/qemu.py) boots again when they are far off.
RTC=/sys/class/rtc/rtc0/since_epoch
if [ -r $RTC ]; then
  read -r a < $RTC; now=$a
  while [ "$now" = "$a" ]; do sleep 0.02; read -r now < $RTC; done
  read -r t0 _ < /proc/uptime
  while [ "$now" -lt $((a + 4)) ]; do sleep 0.02; read -r now < $RTC; done
  read -r t1 _ < /proc/uptime
  echo "$t0 $t1 3" > "$R$OUT/guest-clock"
fi
CLOCK=$(cat "$R$OUT/guest-clock" 2>/dev/null)
case "$CLOCK" in
  *" 3") awk -v c="$CLOCK" 'BEGIN { split(c, v, " "); r = (v[2] - v[1]) / v[3];
           exit !(r < 0.6 || r > 1.7) }' \
         && { say "clock: $CLOCK (guest seconds across 3 RTC seconds): not running the script"
              sync; echo o > /proc/sysrq-trigger; sleep 5; poweroff -f; } ;;
esac

say "running $RUN"
chroot $R /usr/bin/env -i HOME=/root TERM="${TERM:-linux}" \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  /bin/sh "$RUN" < /dev/console > /dev/console 2>&1
echo "$?" > "$R$OUT/guest-exit"
sync
say "done"
echo o > /proc/sysrq-trigger
sleep 5
poweroff -f
