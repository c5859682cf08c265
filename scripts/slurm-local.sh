#!/usr/bin/env bash
# Starts and stops a real, one-node Slurm cluster on this machine, for tests. It uses only Debian 12
# packages (munge, slurmctld, slurmd, slurm-client) and keeps all of its state in one folder: the
# configuration, the munge key and socket, spool and state folders, logs and pid files. Nothing in
# /etc is written: the daemons get their configuration with -f, the clients through SLURM_CONF.
#
#   scripts/slurm-local.sh [--install] start DIR   start munged, slurmctld and slurmd, wait until
#                                                  the node is idle (exit 0), or print the logs' tails
#                                                  and exit 1; the queue starts empty
#   scripts/slurm-local.sh stop DIR                cancel the cluster's jobs, stop its daemons (by
#                                                  their pid files) and wait for them to exit; fine
#                                                  when nothing is running
#   scripts/slurm-local.sh env DIR                 print the exports that clients need:
#                                                  eval "$(scripts/slurm-local.sh env DIR)"; sinfo
#   scripts/slurm-local.sh status DIR              print sinfo and squeue
#   scripts/slurm-local.sh install                 only install (or upgrade) the packages
#
# Must run as root (the daemons run as root: SlurmUser=root, SlurmdUser=root). Works without systemd
# and without cgroups. `start` installs missing packages with apt-get; --install (before any command)
# runs apt-get update and install for all of them, installed or not, first.
# Environment:
#   SLURM_LOCAL_CTLD_PORT, SLURM_LOCAL_SLURMD_PORT  ports (default: the first free pair from 16817)
#   SLURM_LOCAL_TIMEOUT                             seconds `start` waits for an idle node [60]
set -euo pipefail

PACKAGES=(munge slurmctld slurmd slurm-client)
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-60}
[[ $TIMEOUT =~ ^[0-9]+$ ]] || { echo "slurm-local: SLURM_LOCAL_TIMEOUT must be whole seconds" >&2; exit 2; }

# Messages go to stderr, so that `env`'s stdout stays fit for eval.
say() { echo "slurm-local: $*" >&2; }
die() { say "error: $*"; exit 1; }
usage() {
  sed -n '7,17p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# The packages that are not installed; with $1 = all, every package (apt-get then upgrades them).
install_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    if [ "${1:-}" = all ] || ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "need root or sudo to install: ${missing[*]}"
    sudo="sudo"
  fi
  say "installing ${missing[*]}"
  # On a machine with systemd the packages' postinst starts the system munged (harmless: its socket
  # is /run/munge, ours is in DIR); slurmd/slurmctld stay down there without /etc/slurm/slurm.conf.
  # Without an init system (containers) invoke-rc.d starts nothing.
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# The paths, all under DIR. DIR is made absolute: slurm.conf needs absolute paths.
set_paths() {
  [ -n "${1:-}" ] || usage
  DIR=$1
  if [ -d "$DIR" ]; then DIR=$(cd "$DIR" && pwd); else DIR=$(realpath -m "$DIR"); fi
  CONF=$DIR/slurm.conf
  MUNGE_DIR=$DIR/munge
  MUNGE_KEY=$MUNGE_DIR/munge.key
  MUNGE_SOCKET=$MUNGE_DIR/munge.socket
  MUNGE_PID=$MUNGE_DIR/munged.pid
  CTLD_PID=$DIR/run/slurmctld.pid
  SLURMD_PID=$DIR/run/slurmd.pid
  CTLD_LOG=$DIR/log/slurmctld.log
  SLURMD_LOG=$DIR/log/slurmd.log
  MUNGE_LOG=$MUNGE_DIR/munged.log
  # The node is this machine's short host name: slurmctld decides that it is the controller, and
  # slurmd which NodeName it is, by comparing names with gethostname() cut at the first dot.
  NODE=$(hostname -s)
}

# The pid in pid file $1 if that process is alive and is the daemon started from DIR (its command
# line names DIR: -f DIR/slurm.conf, --socket=DIR/...), so that a reused pid is never killed.
running_pid() {
  local pid
  [ -f "$1" ] || return 1
  pid=$(tr -dc '0-9' <"$1")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$DIR/" || return 1
  echo "$pid"
}

port_free() {
  ! ss -Hltn "sport = :$1" 2>/dev/null | grep -q .
}

# Non-default ports, so that the test cluster never meets a real one (6817/6818) on this machine.
choose_ports() {
  if [ -n "${SLURM_LOCAL_CTLD_PORT:-}${SLURM_LOCAL_SLURMD_PORT:-}" ]; then
    CTLD_PORT=${SLURM_LOCAL_CTLD_PORT:-16817}
    SLURMD_PORT=${SLURM_LOCAL_SLURMD_PORT:-$((CTLD_PORT + 1))}
    local p
    for p in "$CTLD_PORT" "$SLURMD_PORT"; do
      # Slurm takes a port above 65535 modulo 65536 without a word; refuse it here.
      if ! [[ $p =~ ^[0-9]+$ ]] || ((p < 1024 || p > 65535)); then die "port $p is not in 1024-65535"; fi
      port_free "$p" || die "port $p is in use (set SLURM_LOCAL_CTLD_PORT and SLURM_LOCAL_SLURMD_PORT)"
    done
    [ "$CTLD_PORT" != "$SLURMD_PORT" ] || die "slurmctld and slurmd need different ports"
    return 0
  fi
  local p
  for ((p = 16817; p < 16917; p += 2)); do
    if port_free "$p" && port_free $((p + 1)); then
      CTLD_PORT=$p
      SLURMD_PORT=$((p + 1))
      return 0
    fi
  done
  die "no free pair of ports in 16817-16918; set SLURM_LOCAL_CTLD_PORT and SLURM_LOCAL_SLURMD_PORT"
}

# The node's size. slurmd -C prints what slurmd will report when it registers; a node configured
# larger than that is drained ("Low socket*core*thread count", "Low RealMemory"), so the topology
# is copied from it, and memory is set below what is available now.
node_line() {
  local hw cpus mem avail
  hw=$(slurmd -C | head -n 1)
  cpus=$(nproc)
  if [[ " $hw " == *" CPUs=$cpus "* ]]; then
    # Boards, sockets, cores and threads as the hardware has them: no "configuration differs" noise.
    hw=$(grep -o 'CPUs=[0-9]* Boards=[0-9]* SocketsPerBoard=[0-9]* CoresPerSocket=[0-9]* ThreadsPerCore=[0-9]*' <<<"$hw") ||
      hw="CPUs=$cpus"
  else
    # nproc is smaller (CPU affinity, a container's quota): give Slurm only what we may use.
    hw="CPUs=$cpus"
  fi
  mem=$(slurmd -C | grep -o 'RealMemory=[0-9]*' | cut -d= -f2) || mem=1024
  avail=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)
  [ -n "$avail" ] || avail=$mem
  ((avail < mem)) && mem=$avail
  mem=$((mem - 512))
  ((mem < 100)) && mem=100
  echo "NodeName=$NODE NodeAddr=127.0.0.1 $hw RealMemory=$mem State=UNKNOWN"
}

write_conf() {
  cat >"$CONF" <<EOF
# Written by scripts/slurm-local.sh: a one-node test cluster. All state lives in $DIR.
ClusterName=local
# The controller is this machine, reached on the loopback only.
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
# Daemons run as root (the script runs as root; no slurm user or /var paths to own).
SlurmUser=root
SlurmdUser=root
# munge authenticates clients and daemons; our own munged's socket, not /run/munge's.
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$CTLD_LOG
SlurmdLogFile=$SLURMD_LOG
SlurmctldDebug=info
SlurmdDebug=info
# No systemd, no cgroups: track a job's processes through /proc's parent links, bind no tasks,
# gather no accounting, no interconnect, no MPI.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
# One job per core. Not CR_Core_Memory (cons_tres's default): there a job without --mem gets the
# whole node's memory, and jobs run one at a time.
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# A node that was down comes back by itself when its slurmd registers (after a restart, say).
ReturnToService=2
# A job whose dependency can never be satisfied (afterok on a failed job) is cancelled, instead of
# pending forever with reason DependencyNeverSatisfied. (KillOnBadDependency, and
# kill_invalid_depend in SchedulerParameters, are the old spellings; 22.05 wants this one.)
DependencyParameters=kill_invalid_depend
# Finished jobs stay visible (scontrol show job, squeue -t all) for 5 minutes.
MinJobAge=300
# scancel and stop: SIGKILL 5 s after SIGTERM, not 30.
KillWait=5
# No mail from sbatch --mail-type.
MailProg=/bin/true
# Jobs that lose their srun or salloc are not killed for inactivity.
InactiveLimit=0
$(node_line)
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

start_munged() {
  mkdir -p "$MUNGE_DIR"
  # munged refuses a socket that not everyone can reach: every folder above it needs o+x, and
  # mktemp -d makes DIR 0700 ("Socket is inaccessible: execute permissions for all required").
  chmod 0755 "$DIR" "$MUNGE_DIR"
  local force=() d=$DIR
  while d=$(dirname "$d"); [ "$d" != / ]; do
    if [ "$(($(stat -c '%#a' "$d") & 1))" -eq 0 ]; then
      # A parent we don't change (e.g. /root, 0700): --force turns the refusal into a warning. Only
      # root can then talk to munged, which is fine for the root-run tests.
      say "warning: $d is not o+x; starting munged with --force (only root can submit jobs)"
      force=(--force)
      break
    fi
  done
  if [ ! -f "$MUNGE_KEY" ]; then
    if command -v mungekey >/dev/null; then
      mungekey --create --keyfile="$MUNGE_KEY"
    else
      dd if=/dev/urandom of="$MUNGE_KEY" bs=1 count=1024 status=none
    fi
  fi
  chmod 0400 "$MUNGE_KEY"
  # munged forks once its socket is ready, so it can be used as soon as this returns. --origin: a
  # host name that doesn't resolve (CI machines) makes munged warn "Failed to lookup origin".
  munged "${force[@]}" --origin=127.0.0.1 --socket="$MUNGE_SOCKET" --key-file="$MUNGE_KEY" --pid-file="$MUNGE_PID" \
    --log-file="$MUNGE_LOG" --seed-file="$MUNGE_DIR/munged.seed"
  munge --socket="$MUNGE_SOCKET" --no-input | unmunge --socket="$MUNGE_SOCKET" >/dev/null
}

print_logs() {
  local f
  for f in "$MUNGE_LOG" "$CTLD_LOG" "$SLURMD_LOG"; do
    [ -f "$f" ] || continue
    echo "----- tail of $f" >&2
    tail -n 25 "$f" >&2
  done
}

node_state() {
  SLURM_CONF=$CONF sinfo -h -n "$NODE" -o %T 2>/dev/null || true
}

wait_idle() {
  local start=$SECONDS state=""
  while ((SECONDS - start < TIMEOUT)); do
    state=$(node_state)
    # "idle" (free) or "mixed"/"allocated" (already running jobs, after an idempotent start).
    case "$state" in
      idle | mixed | allocated) return 0 ;;
    esac
    running_pid "$CTLD_PID" >/dev/null || { say "slurmctld exited"; return 1; }
    running_pid "$SLURMD_PID" >/dev/null || { say "slurmd exited"; return 1; }
    sleep 0.5
  done
  say "the node is not idle after ${TIMEOUT} s (state: ${state:-unknown})"
  return 1
}

cmd_start() {
  [ "$(id -u)" -eq 0 ] || die "start needs root (the daemons run as root)"
  install_packages
  local t0=$SECONDS
  if running_pid "$CTLD_PID" >/dev/null && running_pid "$SLURMD_PID" >/dev/null &&
    running_pid "$MUNGE_PID" >/dev/null; then
    say "already running in $DIR"
    wait_idle || { print_logs; exit 1; }
    return 0
  fi
  cmd_stop # whatever is left of an earlier start (a crashed daemon, stale pid files)
  choose_ports
  mkdir -p "$DIR/state" "$DIR/spool" "$DIR/run" "$DIR/log"
  write_conf
  start_munged || { print_logs; cmd_stop; exit 1; }
  # SLURM_CONF too, not only -f: slurmstepd and the job's srun find the configuration through it.
  # SLURM_LOCAL_DAEMON_DIR marks the daemons' slurmstepd processes for cmd_stop.
  export SLURM_CONF=$CONF SLURM_LOCAL_DAEMON_DIR=$DIR
  # -c: start with an empty queue. A restart in the same DIR would otherwise recover the jobs of an
  # unclean stop (slurmctld killed first) as still running, and keep them, and their CPUs, forever.
  if ! slurmctld -c -f "$CONF" || ! slurmd -f "$CONF" -N "$NODE" || ! wait_idle; then
    print_logs
    cmd_stop
    exit 1
  fi
  say "node $NODE idle after $((SECONDS - t0)) s (slurmctld on 127.0.0.1:$CTLD_PORT); now:"
  say "  eval \"\$($0 env $DIR)\""
}

# The slurmstepd processes of this cluster's slurmd (they inherit its environment, and so its mark).
stepds() {
  local p
  for p in $(pgrep -x slurmstepd || true); do
    tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qxF "SLURM_LOCAL_DAEMON_DIR=$DIR" && echo "$p"
  done
  return 0
}

# Pid $1 and all of its descendants.
tree() {
  local c
  echo "$1"
  for c in $(pgrep -P "$1" || true); do tree "$c"; done
}

# Whether pid $1 runs. A zombie counts as gone: the daemons' parent is PID 1, and in a container
# whose PID 1 never reaps (a shell, sleep) an exited daemon stays a zombie for good.
# (A main thread that exited before the others is a zombie too, but with threads left: alive.)
alive() {
  local state threads
  read -r state threads < <(ps -o stat=,nlwp= -p "$1" 2>/dev/null) || return 1
  [[ $state != Z* || $threads -gt 1 ]]
}

# Send SIGTERM to the daemon of pid file $2, wait for it, SIGKILL after 20 s.
stop_daemon() {
  local name=$1 pid i
  pid=$(running_pid "$2") || return 0
  say "stopping $name (pid $pid)"
  kill "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 200; i++)); do
    alive "$pid" || return 0
    sleep 0.1
  done
  say "$name did not exit after 20 s; SIGKILL"
  kill -9 "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    alive "$pid" || return 0
    sleep 0.1
  done
  say "warning: $name (pid $pid) is still there"
}

cmd_stop() {
  [ -d "$DIR" ] || return 0
  local ids i p
  # Jobs first, while slurmctld still runs: a stopped slurmd leaves its slurmstepds and their jobs
  # running.
  if [ -f "$CONF" ] && running_pid "$CTLD_PID" >/dev/null; then
    ids=$(SLURM_CONF=$CONF squeue -h -o %A 2>/dev/null || true)
    if [ -n "$ids" ]; then
      say "cancelling jobs $(echo "$ids" | tr '\n' ' ')"
      # shellcheck disable=SC2086 # one word per job id
      SLURM_CONF=$CONF scancel $ids 2>/dev/null || true
      for ((i = 0; i < 150; i++)); do
        [ -z "$(stepds)" ] && [ -z "$(SLURM_CONF=$CONF squeue -h -o %A 2>/dev/null)" ] && break
        sleep 0.1
      done
    fi
  fi
  stop_daemon slurmd "$SLURMD_PID"
  # Left when slurmctld was already gone (no scancel): kill each slurmstepd with its job's processes
  # (linuxproc keeps them as its descendants), the whole tree listed before anything is killed.
  for p in $(stepds); do
    say "killing leftover slurmstepd $p and its job"
    # shellcheck disable=SC2046 # one word per pid
    kill -9 $(tree "$p") 2>/dev/null || true
  done
  stop_daemon slurmctld "$CTLD_PID"
  stop_daemon munged "$MUNGE_PID"
  rm -f "$SLURMD_PID" "$CTLD_PID"
}

cmd_env() {
  [ -f "$CONF" ] || die "no cluster in $DIR (run: $0 start $DIR)"
  # Clients need only the configuration: it names the controller's address and port, and the
  # munge socket (AuthInfo). %q quotes a DIR with spaces for eval.
  printf 'export SLURM_CONF=%q\n' "$CONF"
}

cmd_status() {
  [ -f "$CONF" ] || die "no cluster in $DIR"
  SLURM_CONF=$CONF sinfo
  SLURM_CONF=$CONF squeue
}

force_install=0
if [ "${1:-}" = --install ]; then
  force_install=1
  shift
fi
case "${1:-}" in
  install)
    install_packages all
    exit 0
    ;;
  start | stop | env | status) ;;
  *) usage ;;
esac
command=$1
set_paths "${2:-}"
if [ $force_install -eq 1 ]; then install_packages all; fi
"cmd_$command"
