#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# Slurm (Debian's 22.05, issue 22): the guest runs slurmctld and slurmd as a
# cluster of one node (munge for authentication, proctrack/linuxproc,
# task/none), and one job runs two steps of 4 ranks at once
# (`srun --exact --mpi=pmix -n 4`: direct launch, PMIx, no mpirun) of
# test/guest/mpi_check (Open MPI: point-to-point, collectives, one-sided)
# through ibshare-run over UCX_TLS=rc_share,self, doc/loading.md's Slurm
# line. Each step passes, with pml ucx and osc ucx on rc_share only and
# every rank on the node group's resources in the test's mode. With no job
# key set by hand, ibshare_info (sampled while they run) shows one group
# per step, keyed by the step's PMIx namespace (slurm.pmix.<job>.<step>),
# whose members are exactly the step's ranks, and a pool of 4 + 2 slices
# (srun's SLURM_STEP_TASKS_PER_NODE; Open MPI sets its local size only in
# MPI_Init).
#
# Where it runs: slurm-shared.sh (shared mode, the import provider) in every
# `make check`; this one (fallback mode, Debian's rxe provider) in the long
# run only (contrib/check --long; CI's time): what it checks is the same
# code in both modes, but for the resources each rank runs on, whose
# fallback form mpi.sh checks (one PD and one slice MR per rank).
# The daemons' logs are shown when the job fails.

steps_timeout=300

# ---------------------------------------------------------------- guest side

# slurm_up DIR: munged and Slurm's daemons, every file of theirs under DIR
# (the guest's /tmp): a session's next job keeps what a job writes in the
# root file system, and the kernel's state (slurm_down undoes ours)
slurm_up() {
    d=$1 host=$(hostname)
    # Slurm looks up addresses with AI_ADDRCONFIG, which finds none while
    # the guest has no IPv4 address but loopback's 127.0.0.1
    ip link set lo up && ip addr replace "$slurm_addr/32" dev lo || return 1
    # slurmd's cgroup/v2 plugin wants the hierarchy even with
    # proctrack/linuxproc, and a scope for slurmstepd (no systemd here)
    if ! mountpoint -q /sys/fs/cgroup; then
        mount -t cgroup2 none /sys/fs/cgroup || return 1
        cgroup_mounted=1
    fi
    mkdir -p /sys/fs/cgroup/system.slice "$d/state" "$d/spool" || return 1
    dd if=/dev/urandom bs=1024 count=1 of="$d/munge.key" 2>/dev/null
    chmod 400 "$d/munge.key"
    # --force: the key and socket are in a directory that is not munge's
    munged --force --key-file="$d/munge.key" --socket="$d/munge.socket" \
        --pid-file="$d/munged.pid" --log-file="$d/munged.log" \
        --seed-file="$d/munged.seed" 2>/dev/null || return 1
    cat > "$d/slurm.conf" <<CONF
ClusterName=ibshare
SlurmctldHost=$host($slurm_addr)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge.socket
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=$host NodeAddr=$slurm_addr CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
    printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n' > "$d/cgroup.conf"
    export SLURM_CONF="$d/slurm.conf"
    slurmctld && slurmd || return 1
    for _ in $(seq 60); do
        sinfo -h -o %T 2>/dev/null | grep -q '^idle' && return 0
        sleep 1
    done
    return 1
}

# slurm_down DIR: the daemons stopped, the address and the cgroup mount
# gone
slurm_down() {
    for pidfile in "$1/slurmd.pid" "$1/slurmctld.pid" "$1/munged.pid"; do
        [ -s "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null
    done
    sleep 1
    ip addr del "$slurm_addr/32" dev lo 2>/dev/null
    if [ "${cgroup_mounted:-0}" = 1 ]; then
        rmdir /sys/fs/cgroup/system.slice/* /sys/fs/cgroup/system.slice \
            2>/dev/null
        umount /sys/fs/cgroup
    fi
}

slurm_addr=10.77.0.1

guest() {
    out=$1 prog=$2 info=$3 run=$4 tls=$5
    d=$(mktemp -d)
    start=$(date +%s)
    if ! slurm_up "$d"; then
        echo "slurm: the daemons did not come up"
        sinfo
        tail -n 20 "$d"/*.log
        slurm_down "$d"
        exit 1
    fi
    echo "slurm: slurmctld and slurmd up, $(($(date +%s) - start)) s"
    sinfo
    # srun passes the environment on (--export=ALL)
    export UCX_TLS="$tls" UCX_NET_DEVICES=rxe0:1 UCX_LOG_LEVEL=info \
        OMPI_MCA_pml=ucx OMPI_MCA_osc=ucx OMPI_MCA_pml_base_verbose=10 \
        OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any \
        OMPI_MCA_btl='^openib,uct,ofi'
    sh "$IBSHARE_SRCDIR/test/guest/info_sampler.sh" "$out/steps.info" \
        "$info" &
    sampler=$!
    start=$(date +%s)
    # shellcheck disable=SC2016  # (expanded by salloc's shell)
    timeout "$steps_timeout" salloc -n 8 sh -c '
        srun --exact --mpi=pmix -n 4 "$1" "$2" 4 65536 > "$3/a.out" 2>&1 &
        srun --exact --mpi=pmix -n 4 "$1" "$2" 4 65536 > "$3/b.out" 2>&1
        echo $? > "$3/b.rc"
        wait $!
        echo $? > "$3/a.rc"' sh "$run" "$prog" "$out" > "$out/salloc.out" 2>&1
    echo $? > "$out/salloc.rc"
    kill "$sampler"
    echo "slurm: salloc with two steps: status $(cat "$out/salloc.rc")," \
         "$(($(date +%s) - start)) s"
    cat "$out/salloc.out"
    if [ "$(cat "$out/salloc.rc")" != 0 ]; then
        tail -n 20 "$d"/*.log
    fi
    left=$(squeue -h 2>/dev/null | grep -c .)
    echo "slurm: jobs left in the queue: $left"
    echo "$left" > "$out/queue_left"
    slurm_down "$d"
}

if [ "${1:-}" = --guest ]; then
    guest "$2" "$3" "$4" "$5" "$6"
    exit 0
fi

# ---------------------------------------------------------------- host side

. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/mpi_lib.sh"

tl=rc_share tls=rc_share,self
mode=$IBSHARE_TEST_MODE
if [ "$mode" = shared ]; then fallback_lines=0; else fallback_lines=1; fi

for cmd in slurmctld slurmd srun salloc munged; do
    command -v "$cmd" > /dev/null
    check "$cmd is installed (slurm-wlm, munge: contrib/install-deps)" \
        test $? -eq 0
done
check "Slurm's PMIx plugin is installed (slurm-wlm-basic-plugins)" \
    test -e /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so
mpi_prog mpi_check
if [ ! -x "$prog" ] || [ "$failures" -ne 0 ]; then
    finish
fi

in_guest --mem 3G --timeout 900 sh "$IBSHARE_SRCDIR/test/guest/slurm.sh" \
    --guest "$tmpdir" "$prog" "$IBSHARE_BUILDDIR/ibshare_info" \
    "$IBSHARE_BUILDDIR/contrib/ibshare-run" "$tls" > "$tmpdir/guest.log" 2>&1
rc=$?
cat "$tmpdir/guest.log"
check "the guest ran the job (status $rc)" test "$rc" -eq 0
check "salloc with the two steps exits 0 (status $(cat "$tmpdir/salloc.rc" \
    2>/dev/null))" test "$(cat "$tmpdir/salloc.rc" 2>/dev/null)" = 0
check "no job left in Slurm's queue" \
    test "$(cat "$tmpdir/queue_left" 2>/dev/null)" = 0

echo "--- ibshare_info while the steps ran"
cat "$tmpdir/steps.info" 2>/dev/null
groups_of "$tmpdir/steps.info" > "$tmpdir/groups"
keys=$(cut -d' ' -f1 "$tmpdir/groups" | sort -u | tr '\n' ' ' | sed 's/ $//')
check "two groups, two PMIx namespaces of one job's steps ($keys)" sh -c "
    test \$(grep -c '^slurm\.pmix\.[0-9]*\.[0-9]* ' '$tmpdir/groups') -eq 2 &&
    test \$(cut -d' ' -f1 '$tmpdir/groups' | sed 's/\.[0-9]*\$//' |
            sort -u | wc -l) -eq 1 &&
    test \$(echo '$keys' | wc -w) -eq 2"

for step in a b; do
    out=$tmpdir/$step.out
    label="srun step $step, 4 ranks, UCX_TLS=$tls"
    echo "--- $label"
    show "$out"
    status=$(cat "$tmpdir/$step.rc" 2>/dev/null || echo none)
    check "$label: srun exits 0 (status $status)" test "$status" = 0
    summary_ok "$out"
    check "$label: mpi_check: all passed, 0 failed" test $? -eq 0
    n=$(grep -c 'select: component ucx selected' "$out" 2>/dev/null)
    check "$label: pml ucx selected by every rank (${n:-0} of 4)" \
        test "${n:-0}" -eq 4
    check_lanes "$label" "pml ucx" tag "$out"
    check_lanes "$label" "osc ucx" rma "$out"
    check_group "$label" 4 "$out" rank one
    ranks_of "$out" > "$tmpdir/$step.ranks"
    # shellcheck disable=SC2086  # (keys: words)
    found=$(group_with "$tmpdir/$step.ranks" "$tmpdir/steps.info" $keys)
    check "$label: its ranks ($(tr '\n' ' ' < "$tmpdir/$step.ranks")) are\
 the members of one group (${found:-none})" test -n "$found"
    slices=$(awk -v key="'$found'" '
        /^group of job / { g = ($4 == key) }
        g && $1 == "pool:" { print $4 }' "$tmpdir/steps.info")
    check "$label: its pool has 4 + 2 slices, from srun's tasks per node\
 (${slices:-none})" test "${slices:-0}" = 6
    tail_on_failure "$label" "$out" "$status" summary_ok "$out"
done

finish
