#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# An Open MPI job over rc_share alone where rank 1 computes for 20 s without
# calling MPI while rank 0's first messages to it (eager and rendezvous) are
# in flight (test/guest/mpi_compute.c): the job completes, every byte
# arrives, and nothing fails or warns. mpi_add_procs_cutoff 0 makes Open MPI
# create its UCX endpoints at the first message instead of in MPI_Init, so
# the connection itself is made while rank 1 computes: rc_share's connection
# timeout is 8 s here (UCX_RC_SHARE_CONN_TIMEOUT; 30 s by default, and the
# test computed 60 s until CI's time was counted), less than the computing,
# and the target must answer the handshake without progress (a transport
# that answers only from progress fails here).
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

compute_s=20
mpi_prog mpi_compute

in_guest --mem 2G --timeout 600 sh -c '
    timeout 400 mpirun --allow-run-as-root --oversubscribe -np 2 \
        --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
        --mca mpi_add_procs_cutoff 0 \
        -x LD_PRELOAD="$IBSHARE_MODULE" -x UCX_TLS=rc_share,self \
        -x UCX_NET_DEVICES=rxe0:1 -x UCX_RC_SHARE_CONN_TIMEOUT=8s \
        "$2" "$3" > "$1/out" 2>&1
    echo $? > "$1/rc"
' sh "$tmpdir" "$prog" "$compute_s"
check "the guest ran mpirun" test $? -eq 0
cat "$tmpdir/out"
rc=$(cat "$tmpdir/rc" 2>/dev/null || echo none)
check "mpirun exits 0 (status $rc)" test "$rc" = 0
check "rank 0: PASS (every byte arrived, the answer came)" \
    grep -q '^mpi_compute: PASS' "$tmpdir/out"
elapsed=$(sed -n 's/.*came after \([0-9]*\)\..*/\1/p' "$tmpdir/out")
check "the answer came after rank 1's $compute_s s of computing\
 (${elapsed:-?} s)" test "${elapsed:-0}" -ge "$compute_s"
check "no UCX error or warning, no timeout, no crash" \
    sh -c "! grep -qiE 'UCX +(ERROR|WARN)|timeout|show_help|Assertion|received signal' '$tmpdir/out'"
finish
