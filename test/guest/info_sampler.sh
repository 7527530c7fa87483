#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# info_sampler.sh FILE INFO: run in the guest beside an MPI job, until
# killed, keeps in FILE the output of ibshare_info (INFO, the program) that
# lists the most group members and, of those, the most MRs (the first with
# every member may come before the last registered its MR), and in
# FILE.qp the output of rdma res show qp that lists the most RC QPs. Used by
# the tests that prove which node groups a job formed and what it connected
# (mpi.sh, multinode_mpi.sh).
file=$1 info=$2
most=0
most_rc=-1
while :; do
    rdma res show qp > "$file.qp.now" 2>&1
    n=$(grep -c " type RC " "$file.qp.now")
    if [ "$n" -gt "$most_rc" ]; then
        most_rc=$n
        mv "$file.qp.now" "$file.qp"
    fi
    env -u LD_PRELOAD "$info" > "$file.now" 2>&1
    members=$(grep -c -E '^    pid +[0-9]+ ' "$file.now")
    mrs=$(sed -n 's/^  MRs registered: *\([0-9]*\).*/\1/p' "$file.now" |
          awk '{ n += $1 } END { print n + 0 }')
    n=$((members * 1000 + mrs))
    if [ "$n" -gt "$most" ]; then
        most=$n
        mv "$file.now" "$file"
    fi
    # Once a second: the ranks share the guest's vCPUs with the kernel's
    # rxe work, and every sample starts programs
    sleep 1
done
