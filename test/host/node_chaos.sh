#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# A seeded loop of chaos: in each iteration a job's leader (with one member
# that can take over) gets SIGKILL or SIGSTOP at a random moment while 8 to
# 32 joiners arrive. Every joiner ends within the join timeout and a margin
# (a stopped server delays them, it never hangs them), one create() runs per
# job, the live members hold distinct slices, everyone leaves in time and no
# file is left.
#   IBSHARE_CHAOS_SEED=N        reproduce a run (the seed is printed)
#   IBSHARE_CHAOS_ITERATIONS=N  more iterations (default 20)
. "${IBSHARE_SRCDIR:?}/test/lib.sh"
. "$IBSHARE_SRCDIR/test/host/node_lib.sh"

seed=${IBSHARE_CHAOS_SEED:-$(od -An -N3 -tu4 /dev/urandom | tr -d ' ')}
iterations=${IBSHARE_CHAOS_ITERATIONS:-20}
timeout=2      # each joiner's join timeout (-t)
margin=3       # what process start-up and a loaded machine may add to it
seed0=$seed
echo "node_chaos: seed $seed0, $iterations iterations" \
     "(IBSHARE_CHAOS_SEED=$seed0 reproduces this run)"

# rand N: a pseudo-random number in [0, N) in $r, from the seed (an LCG:
# the shell has no $RANDOM, and a seed must give the same run anywhere)
rand() {
    seed=$(((seed * 1103515245 + 12345) % 2147483648))
    r=$(((seed / 65536) % $1))
}

# alive PID: 0 if PID has not exited (a zombie of ours counts as exited)
alive() {
    [ -e "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2> /dev/null
}

# wait_bounded SECONDS PIDS...: 0 if all exited within SECONDS; the others
# are killed, so a hang fails the test instead of stalling it
wait_bounded() {
    limit=$(($1 * 10))
    shift
    n=0
    for p in "$@"; do
        while alive $p && [ $n -lt $limit ]; do
            sleep 0.1
            n=$((n + 1))
        done
    done
    late=0
    for p in "$@"; do
        if alive $p; then
            echo "pid $p did not leave in time" >&2
            kill -KILL $p 2> /dev/null
            late=1
        fi
    done
    return $late
}

start_all=$(date +%s)
i=0
while [ $i -lt $iterations ]; do
    i=$((i + 1))
    fifo ready 4
    fifo hold 5
    key=chaos-$i
    creates=$tmpdir/creates.$i
    out=$tmpdir/joined.$i

    drive F.$i -k $key -c "$creates" -H "$tmpdir/hold" -t $timeout
    f=$!
    lines 1 > "$out"
    drive M.$i -k $key -c "$creates" -H "$tmpdir/hold" -t $timeout
    m=$!
    lines 1 >> "$out"

    rand 25
    n=$((8 + r))
    rand 2
    if [ $r -eq 0 ]; then sig=KILL; else sig=STOP; fi
    # The signal comes after a random number of the joiners were started,
    # and a random pause: any step of a hand-off may be hit
    rand $((n + 1))
    at=$r
    rand 100
    delay=$r

    joiners=
    k=0
    while :; do
        if [ $k -eq $at ]; then
            sleep "$(printf '0.%03d' $delay)"
            kill -$sig $f
        fi
        [ $k -eq $n ] && break
        k=$((k + 1))
        drive J$k.$i -k $key -c "$creates" -H "$tmpdir/hold" -t $timeout
        joiners="$joiners $!"
    done

    # Every joiner reports joined or failed in time, whatever the leader
    # does. The clock starts after the last one was started.
    if ! lines $n $((timeout + margin)) >> "$out"; then
        fail "iteration $i: not every joiner ended within $timeout s +" \
             "$margin s (leader SIG$sig after $at joiners and $delay ms)"
    fi
    joined=$(grep -c '^joined' "$out")
    failed=$(grep -c '^failed' "$out")

    after=
    if [ $sig = STOP ]; then
        rand 2
        if [ $r -eq 0 ]; then after=CONT; else after=KILL; fi
        kill -$after $f
    fi
    echo "iteration $i: $n joiners, leader SIG$sig after $at of them and" \
         "$delay ms${after:+, then SIG$after}: $((joined - 2)) joined," \
         "$failed failed"
    if [ $sig = KILL ] || [ "$after" = KILL ]; then
        wait $f
        dead=$f
    else
        dead=
    fi

    if [ $sig = KILL ]; then
        check "iteration $i: every joiner joined after SIGKILL" \
              test $failed -eq 0
    fi
    grep '^failed' "$out" | grep -v ' status=Operation timed out ' \
        > "$tmpdir/badfail.$i"
    check "iteration $i: joiners failed only by timing out" \
          test ! -s "$tmpdir/badfail.$i"

    # A newcomer after the chaos is served by the same group
    drive Z.$i -k $key -c "$creates" -t $timeout
    z=$!
    lines 1 > "$tmpdir/Z.$i"
    check "iteration $i: a newcomer joined the group" \
          grep -q "^joined .*founder=0 " "$tmpdir/Z.$i"
    wait_bounded 10 $z

    check "iteration $i: one create()" test "$(count . "$creates")" -eq 1
    check "iteration $i: everyone got the founder's pool" \
          test "$(cat "$out" "$tmpdir/Z.$i" | grep '^joined' |
                  grep -c -v " pattern=$f .*fds=ok")" -eq 0

    # Distinct slices among the live members (a killed leader's slice may
    # be handed out again)
    grep '^joined' "$out" "$tmpdir/Z.$i" | grep -v "pid=$dead " |
        sed -n 's/.* slice=\([0-9]*\) .*/\1/p' | sort | uniq -d \
        > "$tmpdir/dup.$i"
    check "iteration $i: live members hold distinct slices" \
          test ! -s "$tmpdir/dup.$i"

    exec 5>&-
    live="$m $joiners"
    [ -z "$dead" ] && live="$f $live"
    check "iteration $i: everyone left within 10 s" wait_bounded 10 $live
    rc=0
    for p in $live; do
        wait $p
        s=$?
        # 0: joined, checked and left; 1: a join that timed out
        if [ $s -ne 0 ] && { [ $s -ne 1 ] || [ $sig = KILL ]; }; then
            echo "pid $p exited with status $s" >&2
            rc=1
        fi
    done
    check "iteration $i: every member's checks passed" test $rc -eq 0
    check "iteration $i: no file left" no_files
    if [ $failures -ne 0 ]; then
        cat "$out" >&2
        echo "node_chaos: reproduce with IBSHARE_CHAOS_SEED=$seed0" \
             "(failed in iteration $i)" >&2
        break
    fi
done

echo "node_chaos: $i iterations in $(($(date +%s) - start_all)) s"
finish
