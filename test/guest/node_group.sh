#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# A node group of 8 processes of one job on rxe0, each opening the rc_share
# iface; memory from the slice costs no registration; each writes into the
# next one's slice over RDMA and reads it back, checked byte for byte
# (test/guest/node_member.c). ibshare_info shows the live group; after the
# job no MR, no PD, no group and no socket of it is left. Then a pool of 2
# slices for 3 members: the third runs with private resources and one
# warning; a bad pool size; a member under valgrind; in shared mode, a member
# whose import fails (UCX_IBSHARE_FAULT=import_fail) and runs its own PD.
#   fallback mode (Debian's rxe provider, no import): every member registers
#     exactly once, its slice; 8 PDs and 8 MRs on the node.
#   shared mode (.shared: the test bed's import provider): the leader
#     registers the pool once and the others import it and register nothing;
#     one PD and one MR on the node, whatever the number of members.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

members=8
mode=$IBSHARE_TEST_MODE
mkdir -p "$tmpdir/meet"

in_guest --timeout 400 sh -c '
    out=$1 members=$2 prog=$3 count_reg=$4 info=$5 mode=$6
    export LD_PRELOAD="$count_reg $IBSHARE_PRELOAD"
    # The group'"'"'s socket needs a local file system: the guest'"'"'s /tmp
    rt=$(mktemp -d)
    # The kernel'"'"'s own (ib_mad'"'"'s PD): what the job leaves must be this
    rdma res show mr > "$out/mr.before"
    rdma res show pd > "$out/pd.before"
    export UCX_IBSHARE_JOB_KEY=node-group-test UCX_IBSHARE_RUNTIME_DIR=$rt
    export UCX_LOG_LEVEL=info
    i=0
    while [ $i -lt $members ]; do
        "$prog" "$out/meet" $i $members rxe0:1 $mode > "$out/member.$i" 2>&1 &
        i=$((i + 1))
    done

    # Everyone has checked its buffer: look at the live group
    i=0 waited=0
    while [ $i -lt $members ] && [ $waited -lt 300 ]; do
        if [ -e "$out/meet/checked.$i" ]; then i=$((i + 1)); else
            sleep 1; waited=$((waited + 1)); fi
    done
    env -u LD_PRELOAD "$info" -d "$rt" > "$out/info.live" 2>&1
    rdma res show mr > "$out/mr.live"
    rdma res show pd > "$out/pd.live"
    touch "$out/meet/release"
    wait
    env -u LD_PRELOAD "$info" -d "$rt" > "$out/info.after" 2>&1
    rdma res show mr > "$out/mr.after"
    rdma res show pd > "$out/pd.after"
    ls -A "$rt/ucx-ibshare-$(id -u)" | grep "\.sock$" > "$out/files.after" || :

    # Not enough slices
    mkdir -p "$out/small/meet"
    export UCX_IBSHARE_JOB_KEY=node-group-small UCX_IBSHARE_SLICE_SIZE=12m \
           UCX_IBSHARE_POOL_SIZE=24m
    for i in 0 1 2; do
        "$prog" "$out/small/meet" $i 3 rxe0:1 any > "$out/small/member.$i" 2>&1 &
    done
    touch "$out/small/meet/release"
    wait

    # A pool that is not a whole number of slices: a clear error
    mkdir -p "$out/bad/meet"
    UCX_IBSHARE_JOB_KEY=node-group-bad UCX_IBSHARE_SLICE_SIZE=11m \
    UCX_IBSHARE_POOL_SIZE=24m \
        "$prog" "$out/bad/meet" 0 1 rxe0:1 any > "$out/bad/member.0" 2>&1
    echo $? > "$out/bad/rc"

    # Under valgrind: no invalid access, no definite leak, no fd left open
    # (libibverbs caches its device list for the process: possibly lost)
    mkdir -p "$out/vg/meet"
    export UCX_IBSHARE_JOB_KEY=node-group-vg
    unset UCX_IBSHARE_POOL_SIZE UCX_IBSHARE_SLICE_SIZE
    valgrind -q --error-exitcode=9 --leak-check=full --num-callers=40 \
        --suppressions="$IBSHARE_SRCDIR/test/valgrind.supp" \
        --errors-for-leak-kinds=definite --show-possibly-lost=no \
        "$prog" "$out/vg/meet" 0 2 rxe0:1 $mode > "$out/vg/member.0" 2>&1 &
    vg=$!
    "$prog" "$out/vg/meet" 1 2 rxe0:1 $mode > "$out/vg/member.1" 2>&1 &
    touch "$out/vg/meet/release"
    wait $vg
    echo $? > "$out/vg/rc"
    wait

    # Shared mode: a member whose import fails (forced) carries on with its
    # own PD and its slice registered; member 0 founds the group first
    if [ "$mode" = shared ]; then
        mkdir -p "$out/fail/meet"
        export UCX_IBSHARE_JOB_KEY=node-group-import-fail
        "$prog" "$out/fail/meet" 0 3 rxe0:1 any > "$out/fail/member.0" 2>&1 &
        n=0
        until [ -e "$out/fail/meet/addr.0" ] || [ $n -ge 600 ]; do
            sleep 0.1; n=$((n + 1))
        done
        UCX_IBSHARE_FAULT=import_fail \
            "$prog" "$out/fail/meet" 1 3 rxe0:1 any > "$out/fail/member.1" 2>&1 &
        echo $! > "$out/fail/pid.1"
        "$prog" "$out/fail/meet" 2 3 rxe0:1 any > "$out/fail/member.2" 2>&1 &
        n=0
        until [ -e "$out/fail/meet/checked.0" ] && [ -e "$out/fail/meet/checked.1" ] &&
              [ -e "$out/fail/meet/checked.2" ] || [ $n -ge 300 ]; do
            sleep 1; n=$((n + 1))
        done
        env -u LD_PRELOAD "$info" -d "$rt" > "$out/fail/info" 2>&1
        touch "$out/fail/meet/release"
        wait
    fi
' sh "$tmpdir" "$members" "$IBSHARE_BUILDDIR/test/guest/node_member" \
     "$IBSHARE_BUILDDIR/test/guest/.libs/libcount_reg.so" \
     "$IBSHARE_BUILDDIR/ibshare_info" "$mode"
check "guest ran" test $? -eq 0

if [ "$mode" = shared ]; then
    per_node=1 fallback_expected=0
else
    per_node=$members fallback_expected=1
fi
i=0 total=0
while [ $i -lt $members ]; do
    grep -v '^ok:' "$tmpdir/member.$i" | grep -v "^\[" | head -5
    regs=$(sed -n 's/^registrations: //p' "$tmpdir/member.$i")
    check "member $i: every check passed (registrations: ${regs:-none})" \
          sh -c "test -n '$regs' && ! grep -q '^FAIL' '$tmpdir/member.$i'"
    total=$((total + ${regs:-0}))
    i=$((i + 1))
done
if [ "$mode" = shared ]; then
    check "the node made 1 registration in all, the pool's ($total)" \
          test "$total" -eq 1
else
    check "each member made 1 registration, its slice ($total in all)" \
          test "$total" -eq "$members"
fi

fallback_lines=$(cat "$tmpdir"/member.* | grep -c "node group in fallback mode")
check "$fallback_expected info line(s) say the group runs in fallback mode ($fallback_lines)" \
      test "$fallback_lines" -eq "$fallback_expected"

cat "$tmpdir/info.live"
check "ibshare_info shows the group of the job" \
      grep -q "node-group-test" "$tmpdir/info.live"
check "ibshare_info shows $members members" \
      grep -qE "members: *$members\b" "$tmpdir/info.live"
check "ibshare_info shows $mode mode" \
      grep -qE "^  mode: +$mode\$" "$tmpdir/info.live"
member_lines=$(grep -cE "^    pid +[0-9]+ +slice +[0-9]+ +$mode\$" "$tmpdir/info.live")
check "ibshare_info shows each member in $mode mode ($member_lines)" \
      test "$member_lines" -eq "$members"
mrs=$(($(grep -c . "$tmpdir/mr.live") - $(grep -c . "$tmpdir/mr.before")))
pds=$(($(grep -c . "$tmpdir/pd.live") - $(grep -c . "$tmpdir/pd.before")))
check "the job held $per_node MR(s) while it ran ($mrs)" \
      test "$mrs" -eq "$per_node"
check "the job held $per_node PD(s) while it ran ($pds)" \
      test "$pds" -eq "$per_node"

check "after the job ibshare_info shows no group" \
      sh -c "! grep -q 'node-group-test' '$tmpdir/info.after'"
cat "$tmpdir/pd.before"
check "after the job the kernel holds the MRs it held before it" \
      cmp -s "$tmpdir/mr.before" "$tmpdir/mr.after"
check "after the job the kernel holds the PDs it held before it" \
      cmp -s "$tmpdir/pd.before" "$tmpdir/pd.after"
cat "$tmpdir/files.after"
check "after the job no socket is left" test ! -s "$tmpdir/files.after"

for i in 0 1 2; do
    check "pool of 2 slices, member $i of 3 still wrote and was written" \
          sh -c "grep -q 'arrived intact' '$tmpdir/small/member.$i' &&
                 ! grep -q '^FAIL' '$tmpdir/small/member.$i'"
done
warned=$(cat "$tmpdir"/small/member.* | grep -c "no free slice in the node pool")
check "one member warned that no slice was free ($warned)" test "$warned" -eq 1

cat "$tmpdir/bad/member.0"
check "a pool size that is not a multiple of the slice size is refused" \
      sh -c "test \"\$(cat '$tmpdir/bad/rc')\" -eq 1 &&
             grep -q 'UCX_IBSHARE_POOL_SIZE=25165824 is out of range (accepted: auto, or a multiple of UCX_IBSHARE_SLICE_SIZE' '$tmpdir/bad/member.0' &&
             ! grep -qE 'Segmentation|backtrace' '$tmpdir/bad/member.0'"

grep -v '^ok:' "$tmpdir/vg/member.0" | grep -v "^\[" | head -20
check "a member under valgrind: every check passed, no fd left open" \
      sh -c "grep -q 'closed every fd' '$tmpdir/vg/member.0' &&
             ! grep -q '^FAIL' '$tmpdir/vg/member.0'"
check "a member under valgrind: no invalid access, no definite leak" \
      test "$(cat "$tmpdir/vg/rc")" -eq 0

if [ "$mode" = shared ]; then
    f=$tmpdir/fail
    cat "$f/info"
    grep -h "importing the node group" "$f"/member.*
    for i in 0 1 2; do
        check "import fails in member 1: member $i wrote, read and was written" \
              sh -c "grep -q 'arrived intact' '$f/member.$i' &&
                     grep -q 'returns what we wrote' '$f/member.$i' &&
                     ! grep -q '^FAIL' '$f/member.$i'"
    done
    warned=$(cat "$f"/member.* | grep -c "importing the node group's objects failed (ibv_import_mr(handle [0-9]*): Operation not permitted (injected: UCX_IBSHARE_FAULT=import_fail)); this rank runs its own PD and registers its slice")
    check "one warning names the failed call and its errno ($warned)" \
          test "$warned" -eq 1
    check "and it is member 1's" grep -q "importing the node group" "$f/member.1"
    regs="$(sed -n 's/^registrations: //p' "$f/member.0" "$f/member.1" "$f/member.2" | tr '\n' ' ')"
    check "registrations: the leader's pool, member 1's own slice, none for member 2 ($regs)" \
          test "$regs" = "1 1 0 "
    check "ibshare_info shows member 1 in fallback mode with its own PD" \
          grep -qE "^    pid +$(cat "$f/pid.1") +slice +[0-9]+ +fallback \(its own PD: its import failed\)\$" "$f/info"
    check "and the other two in shared mode" \
          test "$(grep -cE '^    pid +[0-9]+ +slice +[0-9]+ +shared$' "$f/info")" -eq 2
fi
finish
