#!/usr/bin/env bash
# Soft-RoCE (rxe) VM harness: runs one host command inside a throw-away qemu guest whose
# kernel has an rxe device, rxe0, so the verbs backend can be tested on a machine without
# an RDMA NIC or rxe in the host kernel. The guest sees the host's / read-only (host binaries,
# bazel-bin) and runs the command chrooted there, in the same working directory.
#
#   tools/rxe-vm/run.sh [--timeout SECONDS] [--out DIR] [--env NAME[=VALUE]]... -- COMMAND [ARGS...]
#
# Exit status: the command's; 124 when the timeout hits; 125 when the VM could not boot or
# rxe could not be set up (the reason goes to stderr). See tools/rxe-vm/README.md.
set -euo pipefail

prog="rxe-vm"
die_setup() {
  echo "$prog: $*" >&2
  exit 125
}
usage() {
  sed -n '7p' "$0" | sed 's/^#   //' >&2
  exit 125
}

timeout_s=600
out_dir=""
env_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) timeout_s="${2:?}"; shift 2 ;;
    --timeout=*) timeout_s="${1#*=}"; shift ;;
    --out) out_dir="${2:?}"; shift 2 ;;
    --out=*) out_dir="${1#*=}"; shift ;;
    --env)
      e="${2:?}"
      [[ "$e" == *=* ]] || e="$e=${!e-}"
      env_args+=("$e"); shift 2 ;;
    --) shift; break ;;
    -h | --help) usage ;;
    *) echo "$prog: unknown option $1" >&2; usage ;;
  esac
done
[ $# -gt 0 ] || usage
[[ "$timeout_s" =~ ^[1-9][0-9]*$ ]] || die_setup "--timeout wants a positive number of seconds"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
workspace="$(cd "$here/../.." && pwd)"
self="$here/$(basename "${BASH_SOURCE[0]}")"

# --- host packages -------------------------------------------------------------------------
# Installed (once) by install-deps.sh; its report is shown only when it had work to do.
deps_log="$(bash "$workspace/tools/install-deps.sh" --rxe-vm-only 2>&1)" ||
  die_setup "tools/install-deps.sh --rxe-vm-only failed: $deps_log"
case "$deps_log" in *"packages present") ;; *) echo "$deps_log" >&2 ;; esac

# --- cache location ------------------------------------------------------------------------
# Under bazel's output base of this workspace: found through the bazel-out symlink (no bazel
# server needed), else asked of bazel (before the first build); else the user's cache.
cache_base="${SOFTFAB_VM_CACHE:-}"
if [ -z "$cache_base" ] && [ -L "$workspace/bazel-out" ]; then
  target="$(readlink -f "$workspace/bazel-out" || true)"
  case "$target" in */execroot/*) cache_base="${target%%/execroot/*}/rxe-vm" ;; esac
fi
if [ -z "$cache_base" ] && command -v bazel >/dev/null; then
  ob="$(cd "$workspace" && timeout 120 bazel info output_base 2>/dev/null || true)"
  [ -n "$ob" ] && [ -d "$ob" ] && cache_base="$ob/rxe-vm"
fi
[ -n "$cache_base" ] || cache_base="${XDG_CACHE_HOME:-$HOME/.cache}/softfab/rxe-vm"
mkdir -p "$cache_base" || die_setup "cannot create cache $cache_base"

kernel_pkg="$(apt-cache depends linux-image-amd64 2>/dev/null |
  sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -n1)"
[ -n "$kernel_pkg" ] || die_setup "apt-cache depends linux-image-amd64 names no kernel image"
kver="${kernel_pkg#linux-image-}"
script_hash="$(sha256sum "$self" | cut -c1-16)"
cache="$cache_base/$kver-$script_hash"

# --- guest init (written into the initramfs) -----------------------------------------------
# Runs as PID 1 under busybox. Reports setup failures to /ctl/setup-failed; the command's
# output goes to /ctl/stdout and /ctl/stderr, its status to /ctl/rc.
guest_init() {
  cat <<'INIT'
#!/bin/sh
export PATH=/bin
mount -t devtmpfs dev /dev
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sys /sys
fail() {
  echo "rxe-vm guest: $*"
  [ -d /ctl/. ] && echo "$*" >/ctl/setup-failed
  sync
  poweroff -f
}
while read -r m; do
  insmod "/lib/modules/$m.ko" || fail "insmod $m failed"
done </modules.order
mkdir -p /ctl /host
p9="trans=virtio,version=9p2000.L,msize=262144"
mount -t 9p -o "$p9" ctl /ctl || fail "cannot mount the control share"
# The host root is read-only for the VM's short life, so the guest may cache it (cache=loose):
# host binaries and libraries then load from guest memory after the first read.
mount -t 9p -o "$p9,ro,cache=loose" hostroot /host || fail "cannot mount the host root"
mount -t proc proc /host/proc &&
  mount -t sysfs sys /host/sys &&
  mount -t devtmpfs dev /host/dev &&
  mkdir -p /host/dev/shm /host/dev/pts &&
  mount -t tmpfs -o mode=1777 shm /host/dev/shm &&
  mount -t devpts devpts /host/dev/pts &&
  mount -t tmpfs -o mode=1777 tmp /host/tmp &&
  mount -t tmpfs -o mode=0755 run /host/run || fail "cannot mount proc/sys/dev/tmp/run"
mkdir -p /host/run/softfab-vm && mount -o bind /ctl /host/run/softfab-vm ||
  fail "cannot bind the control share"
read -r out </ctl/out_dir
read -r tmo </ctl/timeout
# A working directory the tmpfs mounts above hide (a checkout under /tmp, as CI may use)
# comes as a share of its own, read-only, at the same path.
read -r work </ctl/work_dir
if [ -n "$work" ]; then
  mkdir -p "/host$work" 2>/dev/null
  mount -t 9p -o "$p9,ro" work "/host$work" || fail "cannot mount the working directory at $work"
fi
mkdir -p "/host$out" 2>/dev/null
mount -t 9p -o "$p9" out "/host$out" || fail "cannot mount the output share at $out"
# Host tools by full path: busybox runs its own applets in place of names it knows.
h="chroot /host /usr/bin/env PATH=/usr/sbin:/usr/bin:/sbin:/bin"
for step in "ip link set lo up" "ip link add veth0 type veth peer name veth1" \
  "ip addr add 192.0.2.1/24 dev veth0" "ip link set veth0 up" "ip link set veth1 up" \
  "rdma link add rxe0 type rxe netdev veth0"; do
  $h $step || fail "$step failed"
done
state=/sys/class/infiniband/rxe0/ports/1/state
i=0
until grep -q ACTIVE "$state" 2>/dev/null; do
  i=$((i + 1))
  [ "$i" -le 100 ] || fail "rxe0 port 1 not ACTIVE: $(cat "$state" 2>&1)"
  sleep 0.1
done
echo ready >/ctl/ready
uptime_s() { cut -d. -f1 /proc/uptime; }
start=$(uptime_s)
$h /usr/bin/timeout -k 5 "$tmo" /bin/bash /run/softfab-vm/job.sh \
  >/ctl/stdout 2>/ctl/stderr
rc=$?
# timeout says 137, not 124, when the command ignored SIGTERM and needed the KILL.
[ "$rc" = 137 ] && [ $(($(uptime_s) - start)) -ge "$tmo" ] && rc=124
echo "$rc" >/ctl/rc
sync
poweroff -f
INIT
}

# Kernel modules the guest loads (their dependencies are added in modprobe's order).
guest_modules=(crc32_generic virtio_pci 9pnet_virtio 9p rdma_rxe ib_uverbs rdma_ucm veth)

prepare() {
  local work="$1" started=$SECONDS
  echo "$prog: preparing kernel $kver and initramfs in $cache (once)" >&2
  mkdir -p "$cache_base/debs"
  local deb
  deb="$(ls "$cache_base/debs/${kernel_pkg}_"*.deb 2>/dev/null | head -n1 || true)"
  if [ -z "$deb" ]; then
    (cd "$cache_base/debs" &&
      apt-get download -q -o APT::Sandbox::User="$(id -un)" "$kernel_pkg" >&2) ||
      die_setup "apt-get download $kernel_pkg failed"
    deb="$(ls "$cache_base/debs/${kernel_pkg}_"*.deb | head -n1)"
  fi
  dpkg -x "$deb" "$work/root" || die_setup "dpkg -x $deb failed"
  depmod -b "$work/root" "$kver" || die_setup "depmod failed"
  local ird="$work/initramfs"
  mkdir -p "$ird"/{bin,dev,proc,sys,lib/modules}
  cp /bin/busybox "$ird/bin/busybox"
  local applet
  for applet in $("$ird/bin/busybox" --list); do
    [ -e "$ird/bin/$applet" ] || ln -s busybox "$ird/bin/$applet"
  done
  local deps
  deps="$(modprobe -d "$work/root" -S "$kver" -a --show-depends "${guest_modules[@]}")" ||
    die_setup "modprobe --show-depends failed"
  local path name
  : >"$ird/modules.order"
  while read -r kind path _; do
    [ "$kind" = insmod ] || continue
    name="$(basename "$path")"
    name="${name%%.ko*}"
    grep -qx "$name" "$ird/modules.order" && continue
    case "$path" in
      *.ko.xz) xz -dc "$path" >"$ird/lib/modules/$name.ko" ;;
      *.ko.zst) zstd -qdc "$path" >"$ird/lib/modules/$name.ko" ;;
      *.ko) cp "$path" "$ird/lib/modules/$name.ko" ;;
    esac || die_setup "cannot unpack $path"
    echo "$name" >>"$ird/modules.order"
  done <<<"$deps"
  guest_init >"$ird/init"
  chmod 755 "$ird/init"
  (cd "$ird" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd.img" ||
    die_setup "cannot build the initramfs"
  cp "$work/root/boot/vmlinuz-$kver" "$work/vmlinuz"
  rm -rf "$work/root" "$ird"
  echo "$prog: prepared in $((SECONDS - started)) s" >&2
}

exec 9>"$cache_base/.lock"
flock 9
if [ ! -f "$cache/vmlinuz" ] || [ ! -f "$cache/initrd.img" ]; then
  work="$(mktemp -d "$cache_base/prepare.XXXXXX")"
  prepare "$work"
  rm -rf "$cache"
  mv "$work" "$cache"
  # Older preparations (another kernel, an older harness, an interrupted run) and other
  # kernels' packages go.
  for old in "$cache_base"/*-[0-9a-f]*[0-9a-f] "$cache_base"/prepare.* "$cache_base"/debs/*.deb; do
    case "$old" in "$cache" | "$cache_base/debs/${kernel_pkg}_"*) ;; *) rm -rf "$old" ;; esac
  done
fi
flock -u 9
exec 9>&-

# --- per-run control and output shares -----------------------------------------------------
ctl="$(mktemp -d "${TMPDIR:-/tmp}/rxe-vm-ctl.XXXXXX")"
out_is_temp=0
if [ -z "$out_dir" ]; then
  out_dir="$(mktemp -d "${TMPDIR:-/tmp}/rxe-vm-out.XXXXXX")"
  out_is_temp=1
fi
mkdir -p "$out_dir" || die_setup "cannot create $out_dir"
out_dir="$(cd "$out_dir" && pwd -P)"
cleanup() {
  rm -rf "$ctl"
  if [ "$out_is_temp" = 1 ]; then rmdir "$out_dir" 2>/dev/null || true; fi
}
trap cleanup EXIT

cwd="$(pwd -P)"
work_dir=""
work_share=()
case "$cwd/" in
  /tmp/* | /run/*)
    # Hidden by the guest's tmpfs mounts: shared on its own (read-only).
    work_dir="$cwd"
    work_share=(-virtfs "local,path=$cwd,mount_tag=work,security_model=none,readonly=on,multidevs=remap") ;;
  /proc/* | /sys/* | /dev/*)
    echo "$prog: warning: $cwd is hidden in the guest; the command runs in /" >&2 ;;
esac
echo "$work_dir" >"$ctl/work_dir"
echo "$out_dir" >"$ctl/out_dir"
echo "$timeout_s" >"$ctl/timeout"
{
  echo "# job for the rxe VM: runs in the host root, chrooted"
  printf 'cd -- %q 2>/dev/null || cd /\n' "$cwd"
  printf 'exec env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
  printf ' LANG=C.UTF-8 TERM=dumb SOFTFAB_RXE_DEVICE=rxe0 SOFTFAB_IN_VM=1'
  printf ' %q' "SOFTFAB_VM_OUT=$out_dir"
  for e in "${env_args[@]+"${env_args[@]}"}"; do printf ' %q' "$e"; done
  printf ' %q' "$@"
  echo
} >"$ctl/job.sh"
: >"$ctl/stdout"
: >"$ctl/stderr"

# --- boot ----------------------------------------------------------------------------------
boot_margin_s=120
timeout -k 10 "$((timeout_s + boot_margin_s))" qemu-system-x86_64 \
  -accel tcg -cpu max -m 2048 -smp 2 -nic none -no-reboot -nographic \
  -kernel "$cache/vmlinuz" -initrd "$cache/initrd.img" \
  -append "console=ttyS0 quiet loglevel=0 panic=-1" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$ctl,mount_tag=ctl,security_model=none,multidevs=remap" \
  -virtfs "local,path=$out_dir,mount_tag=out,security_model=none,multidevs=remap" \
  "${work_share[@]+"${work_share[@]}"}" \
  </dev/null >"$ctl/console.log" 2>&1 &
qemu_pid=$!
# Stream the command's output while it runs; tail stops once qemu has been reaped.
tail -n +1 -f --pid="$qemu_pid" "$ctl/stdout" &
tail_out=$!
tail -n +1 -f --pid="$qemu_pid" "$ctl/stderr" >&2 &
tail_err=$!
qemu_status=0
wait "$qemu_pid" || qemu_status=$?
wait "$tail_out" "$tail_err" || true

if [ -s "$ctl/rc" ]; then
  rc="$(cat "$ctl/rc")"
  [ "$rc" != 124 ] || echo "$prog: the command timed out after $timeout_s s" >&2
  exit "$rc"
fi
if [ "$qemu_status" = 124 ] || [ "$qemu_status" = 137 ]; then
  if [ -f "$ctl/ready" ]; then
    echo "$prog: timed out after $timeout_s s (the guest did not stop)" >&2
    exit 124
  fi
  die_setup "the VM did not become ready within $((timeout_s + boot_margin_s)) s"
fi
if [ -s "$ctl/setup-failed" ]; then
  echo "$prog: guest setup failed: $(cat "$ctl/setup-failed"); console:" >&2
else
  echo "$prog: the VM stopped without a result (qemu status $qemu_status); console:" >&2
fi
tail -n 20 "$ctl/console.log" | tr -d '\033' >&2
exit 125
