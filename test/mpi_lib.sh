# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# shellcheck shell=sh disable=SC2154  # (tl, mode, fallback_lines: the test's; ucp_ep_cfg_re, tmpdir: test/lib.sh's)
# Host-side helpers of the tests that run MPI and OpenSHMEM jobs in the guest
# and read what UCX and ibshare_info printed (mpi.sh, slurm.sh,
# perftest_ucp.sh, multinode_mpi.sh); sourced after test/lib.sh.

# lane_groups LANE FILE...: the resource lists of LANE in UCP's ep_cfg lines,
# one a line ("rc_verbs/rxe0:1", "self/memory0 rc_verbs/rxe0:1", ...)
lane_groups() {
    lg_lane=$1
    shift
    grep -h -E "$ucp_ep_cfg_re" "$@" 2>/dev/null |
        grep -o " $lg_lane([^)]*)" | sed "s/^ $lg_lane(//; s/)\$//"
}

# lanes_ok TL LANE FILE...: LANE appears, uses TL, and no other transport
# than TL or self
lanes_ok() {
    lo_tl=$1
    shift
    lo_groups=$(lane_groups "$@")
    [ -n "$lo_groups" ] || return 1
    echo "$lo_groups" | grep -E -q "(^| )$lo_tl/" || return 1
    ! echo "$lo_groups" | tr ' ' '\n' | grep -v -e "^$lo_tl/" -e '^self/' |
        grep -q .
}

# lanes_found LANE FILE...: "LANE(resources) ..." as found, each once
lanes_found() {
    lane_groups "$@" | sort -u | sed "s/^/$1(/; s/\$/)/" | tr '\n' ' ' |
        sed 's/ $//'
}

# check_lanes LABEL WHO LANE FILE: LANE of UCP's endpoints in FILE on the
# transport under test ($tl) or self only; WHO names the component that
# uses it
check_lanes() {
    lanes_ok "$tl" "$3" "$4"
    cl_rc=$?
    check "$1: $2: $3 lanes on $tl (or self) only: found\
 $(lanes_found "$3" "$4")" test "$cl_rc" -eq 0
}

# check_group LABEL NP FILE UNIT [one]: every one of the NP ranks (UNIT:
# rank, PE) used the node group's resources in the test's mode ($mode);
# with "one", also one group for the job: $fallback_lines fallback-mode
# lines (1 in fallback mode, 0 in shared mode)
check_group() {
    cg_n=$(grep -c "rxe0: $mode resources: [0-9]* memory registrations" \
        "$3")
    check "$1: every $4 used the node group's resources in $mode\
 mode ($cg_n of $2)" test "$cg_n" -eq "$2"
    [ "${5:-}" = one ] || return 0
    cg_n=$(grep -c 'node group in fallback mode' "$3")
    check "$1: one group for the job: $fallback_lines fallback-mode\
 line(s) ($cg_n)" test "$cg_n" -eq "$fallback_lines"
}

# ranks_of FILE: the pids of UCX's log lines in FILE
# ("[TIME] [HOST:PID  :THREAD] ..."), sorted, one a line
ranks_of() {
    grep -o '^\[[0-9.]*\] \[[^:]*:[0-9]* *:' "$1" 2>/dev/null |
        sed 's/^.*:\([0-9]*\) *:$/\1/' | sort -u
}

# groups_of INFO: ibshare_info's groups in INFO, "KEY PID..." a line
groups_of() {
    sed -n "s/^group of job '\(.*\)' on .*/\1/p; s/^  members: [0-9]* (pids\(.*\))$/\1/p" \
        "$1" 2>/dev/null | paste -d ' ' - -
}

# members_of INFO KEY: the pids of KEY's group in INFO, sorted, one a line
members_of() {
    groups_of "$1" | awk -v key="$2" '$1 == key {
        for (i = 2; i <= NF; i++) print $i }' | sort
}

# group_with RANKS INFO KEY...: the KEY whose group in INFO has as members
# exactly the pids in file RANKS (none: nothing)
group_with() {
    gw_ranks=$1 gw_info=$2
    shift 2
    for gw_key; do
        members_of "$gw_info" "$gw_key" > "$tmpdir/members"
        if [ -s "$tmpdir/members" ] && cmp -s "$tmpdir/members" "$gw_ranks"
        then
            echo "$gw_key"
            return 0
        fi
    done
}

# mpi_check's own lines (its checks, the figures, the summary), indented
show() {
    grep -E '^((ok|FAIL): mpi_check|mpi_check: )' "$1" 2>/dev/null |
        sed 's/^/    /'
}

# summary_ok FILE: mpi_check's summary line says every check passed, and none
# failed
summary_ok() {
    grep -E -q '^mpi_check: [1-9][0-9]* passed, 0 failed$' "$1" 2>/dev/null &&
        ! grep -q '^FAIL: mpi_check' "$1"
}

# tail_on_failure LABEL FILE STATUS CHECK...: FILE's last lines unless the
# job's STATUS is 0 and the command CHECK... succeeds
tail_on_failure() {
    tf_label=$1 tf_file=$2 tf_status=$3
    shift 3
    [ "$tf_status" = 0 ] && "$@" && return 0
    echo "--- $tf_label: output (tail)" >&2
    tail -n 40 "$tf_file" >&2
}
