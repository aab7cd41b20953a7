#!/usr/bin/env bash
# A single-node Slurm cluster on this machine (controller and one compute node on
# localhost), for running `softfab study --shard` as an array job in CI and by hand:
#   cluster.sh start    start munged (unless one already answers), slurmctld and slurmd
#   cluster.sh stop     stop the daemons this script started, by their process ids
#   cluster.sh env      print the `export SLURM_CONF=...` line the client commands need
# Everything lives in $SOFTFAB_SLURM_DIR (default /tmp/softfab-slurm): slurm.conf, state,
# spool, logs and the pid files; /etc/slurm is not touched. Needs root and the Debian
# packages slurm-wlm and munge (tools/install-deps.sh). Slurm 22.05 as in Debian 12.
# Exit status: 0 done, 1 a daemon did not come up (its log is printed), 2 usage or
# missing packages.
set -euo pipefail

dir=${SOFTFAB_SLURM_DIR:-/tmp/softfab-slurm}
conf=$dir/slurm.conf
host=$(hostname -s)

log() { echo "cluster.sh: $*" >&2; }

# Waits up to $1 seconds for the command in the remaining arguments to succeed.
wait_for() {
  local seconds=$1
  shift
  local i
  for ((i = 0; i < seconds * 4; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.25
  done
  return 1
}

munge_works() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

# The pid in file $1 if that process is alive.
live_pid() {
  local pid
  [ -f "$1" ] || return 1
  pid=$(cat "$1")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# Stops the process whose pid is in file $1 (TERM, then KILL after 15 s) and
# removes the file.
stop_pid_file() {
  local file=$1 pid i
  if pid=$(live_pid "$file"); then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 60; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "pid $pid ($(basename "$file" .pid)) ignored TERM: KILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$file"
}

write_conf() {
  local cpus mem_mb
  cpus=$(nproc)
  # 80% of the machine's memory: slurmd drains a node that has less than it claims.
  mem_mb=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.8 }' /proc/meminfo)
  cat >"$conf" <<EOF
# Written by tools/slurm/cluster.sh: a one-node cluster on localhost.
ClusterName=softfab
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

start_munge() {
  if munge_works; then
    log "munged already answers: using it (and leaving it running)"
    return 0
  fi
  if [ ! -s /etc/munge/munge.key ]; then
    log "creating /etc/munge/munge.key"
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  runuser -u munge -- /usr/sbin/munged
  if ! wait_for 10 munge_works || [ ! -s /run/munge/munged.pid ]; then
    log "munged did not come up"
    tail -n 20 /var/log/munge/munged.log >&2 || true
    return 1
  fi
  cp /run/munge/munged.pid "$dir/munged.pid"
}

node_idle() { SLURM_CONF=$conf sinfo -h -N -o %T | grep -qx idle; }

start() {
  local d
  for d in munge unmunge munged slurmctld slurmd sbatch sinfo runuser; do
    command -v "$d" >/dev/null || [ -x "/usr/sbin/$d" ] || {
      log "$d not found: install slurm-wlm and munge (tools/install-deps.sh)"
      exit 2
    }
  done
  [ "$(id -u)" -eq 0 ] || { log "needs root"; exit 2; }
  mkdir -p "$dir"
  if live_pid "$dir/slurmctld.pid" >/dev/null || live_pid "$dir/slurmd.pid" >/dev/null; then
    log "already running (stop it first)"
    exit 1
  fi
  rm -rf "$dir/state" "$dir/spool" "$dir"/*.log
  mkdir -p "$dir/state" "$dir/spool"
  write_conf
  start_munge || exit 1
  /usr/sbin/slurmctld -f "$conf"
  if ! wait_for 20 live_pid "$dir/slurmctld.pid"; then
    log "slurmctld did not start"
    tail -n 30 "$dir/slurmctld.log" >&2 || true
    exit 1
  fi
  /usr/sbin/slurmd -f "$conf"
  if ! wait_for 30 node_idle; then
    log "node $host not idle after 30 s"
    SLURM_CONF=$conf sinfo -N >&2 || true
    tail -n 30 "$dir/slurmd.log" "$dir/slurmctld.log" >&2 || true
    exit 1
  fi
  log "up: node $host idle ($(nproc) CPUs); client commands need SLURM_CONF=$conf"
}

stop() {
  stop_pid_file "$dir/slurmd.pid"
  stop_pid_file "$dir/slurmctld.pid"
  stop_pid_file "$dir/munged.pid"  # only there if this script started munged
  log "stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *)
    echo "usage: $0 start|stop|env" >&2
    exit 2
    ;;
esac
