#!/usr/bin/env bash
# A single-node Slurm cluster for trying srun on this machine (docs/operations/cluster-launchers.md).
#   scripts/lab/slurm.sh start [DIR] [--owner PID]
#                                      writes DIR/slurm.conf (default DIR: /tmp/gossamer-slurm),
#                                      starts slurmctld and slurmd from it, waits until the node
#                                      takes jobs, and prints the line to use it:
#                                      export SLURM_CONF=DIR/slurm.conf
#                                      --owner PID: stop the cluster when PID exits (a test
#                                      killed by its timeout leaves nothing behind), at the
#                                      latest after 2 hours
#   scripts/lab/slurm.sh stop [DIR]    cancels its jobs, stops those two daemons, removes DIR
#   scripts/lab/slurm.sh check         exit 0 when slurmctld, slurmd and srun are installed
# Needs root (the daemons run as root, AuthType=auth/none: for a test machine only, never on a
# shared network) and Debian's slurm-wlm (scripts/deps.sh --lab). Each DIR is its own cluster
# with its own free ports, so several can run at once (ctest -j2). Every wait is bounded.
set -euo pipefail

cmd="${1:-}"
dir="${2:-/tmp/gossamer-slurm}"
owner=""
if [ "${3:-}" = "--owner" ]; then
  owner="${4:-}"
  case "$owner" in ''|*[!0-9]*) echo "slurm.sh: --owner needs a process id, got '$owner'" >&2; exit 2 ;; esac
fi
say() { echo "slurm.sh: $*" >&2; }

missing() {
  local m=()
  for p in slurmctld slurmd srun sinfo; do command -v "$p" >/dev/null 2>&1 || m+=("$p"); done
  [ "$(id -u)" -eq 0 ] || m+=("root")
  [ ${#m[@]} -eq 0 ] || { echo "${m[*]}"; return 1; }
}

# Two TCP ports that were free a moment ago.
free_ports() {
  python3 - <<'EOF'
import socket
held = [socket.socket() for _ in range(2)]
for s in held: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in held))
EOF
}

stop_daemons() {
  local d="$1"
  # Its jobs first, so that no slurmstepd or task outlives the daemons (bounded: 10 s).
  if [ -e "$d/slurm.conf" ]; then
    SLURM_CONF="$d/slurm.conf" timeout 5 scancel --quiet --full \
      --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 50); do
      [ -z "$(SLURM_CONF="$d/slurm.conf" timeout 5 squeue -h -o %i 2>/dev/null || true)" ] && break
      sleep 0.2
    done
  fi
  for name in slurmd slurmctld; do
    local pidfile="$d/$name.pid"
    [ -f "$pidfile" ] || continue
    local pid
    pid="$(cat "$pidfile" 2>/dev/null || true)"
    [ -n "$pid" ] || continue
    # Only the daemon this folder started: its command line names this folder's config.
    if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$d/slurm.conf"; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
}

case "$cmd" in
  check)
    if why="$(missing)"; then exit 0; fi
    echo "missing: $why" >&2; exit 1 ;;
  start)
    if ! why="$(missing)"; then
      say "cannot start: missing $why (scripts/deps.sh --lab installs slurm-wlm; run as root)"
      exit 2
    fi
    case "$dir" in /*) ;; *) dir="$(pwd)/$dir" ;; esac
    if [ -e "$dir/slurm.conf" ]; then
      say "$dir already holds a cluster; stop it first (scripts/lab/slurm.sh stop $dir)"
      exit 2
    fi
    mkdir -p "$dir/state" "$dir/spool" "$dir/log"
    read -r ctld_port slurmd_port < <(free_ports)
    node="$(hostname -s)"
    cpus="$(nproc --all)"
    # One cluster name per folder: slurmctld keeps its state per cluster.
    cluster="g$(echo "$dir" | cksum | cut -d' ' -f1)"
    cat >"$dir/slurm.conf" <<EOF
ClusterName=$cluster
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=10
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
PlugStackConfig=/dev/null
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=lab Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:64
EOF
    export SLURM_CONF="$dir/slurm.conf"
    slurmctld -f "$SLURM_CONF" -i >"$dir/log/slurmctld.out" 2>&1 &
    slurmd -f "$SLURM_CONF" -N "$node" >"$dir/log/slurmd.out" 2>&1 &
    # Bounded wait: 30 s for the node to be idle.
    for _ in $(seq 150); do
      state="$(sinfo -h -n "$node" -o %t 2>/dev/null || true)"
      case "$state" in idle*|mix*|alloc*)
        if [ -n "$owner" ]; then
          # Detached watcher: stops this cluster once the owner is gone (polls once a second).
          setsid nohup bash -c 'for _ in $(seq 7200); do kill -0 "$1" 2>/dev/null || break; sleep 1; done
                                "$2" stop "$3"' _ "$owner" "$(readlink -f "$0")" "$dir" \
            >/dev/null 2>&1 </dev/null &
        fi
        echo "export SLURM_CONF=$SLURM_CONF"; exit 0 ;;
      esac
      sleep 0.2
    done
    say "the node did not become idle within 30 s (state: ${state:-none}); logs in $dir/log"
    tail -n 5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 2>/dev/null || true
    stop_daemons "$dir"
    exit 1 ;;
  stop)
    case "$dir" in /*) ;; *) dir="$(pwd)/$dir" ;; esac
    if [ ! -e "$dir/slurm.conf" ]; then say "no cluster in $dir"; exit 0; fi
    stop_daemons "$dir"
    rm -rf "$dir"
    ;;
  -h|--help|"")
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    [ -n "$cmd" ] || exit 2 ;;
  *)
    say "unknown command '$cmd'; use start, stop or check"; exit 2 ;;
esac
