#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# The node group's lifetime, in the mode the guest's provider gives
# (node_lifetime.sh: fallback; node_lifetime.shared: shared, the import
# provider). Processes of test/guest/node_lifetime.c talk without a pause
# (put_zcopy, flush, get_zcopy of the same region, checked byte for byte)
# while the group around them changes:
#   A. the founder L leaves normally while M1 and M2 talk: they go on, one
#      of them serves the group, a newcomer N1 joins through it and talks
#      to both, and they to it;
#   B. the founder L2 is killed (kill -9) while M3 and M4 talk: they go on,
#      one of them serves, a newcomer N2 joins; in shared mode the new
#      server destroys what L2 left on the group's device context (its
#      ledger, src/md/ibshare_ledger.h) and frees its slice: no slice stays
#      retired;
#      then a member V that M3 talks to is killed: M3 reports V failed
#      within BOUND seconds and goes on with M4 and N2;
#   and at the end every survivor leaves with 0 errors, and the kernel's PD,
#   MR, QP and CQ tables are as they were before the first process.
# Where it runs: node_lifetime-shared.sh in every `make check`; this one,
# fallback mode, in the long run only (contrib/check --long, make
# check-long; issue 19: CI's time). By default, fallback mode's own parts
# run elsewhere: a takeover after the founder left or was killed on the
# host (test/host/node_takeover.sh, node_chaos.sh), one PD and MR per
# member (node_group.sh), a killed peer reported (peer_failure.sh).
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

# How long M3 may take to report V's death. Fallback mode: V's QPs die with
# it, the next put or get to it runs out of RC retries
# (UCX_RC_SHARE_TIMEOUT 1 s (1.07 s as the QP has it) x (RETRY_COUNT 6 + 1)
# = 7.5 s), ep_check's write the same. Shared mode: V's QPs live on and
# answer; ep_check's liveness check gives up after
# UCX_RC_SHARE_CHECK_TIMEOUT (10 s), and the check starts within a second
# (the program checks every endpoint every second). Twice the longer of the
# two with room for TCG and seven busy processes on 2 vCPUs: 60 s.
bound=60
# How long the script waits for the report (to show the time when it is late)
report_wait=90
# The rounds (put, flush, get, every byte checked) each pair must make after
# each change of the group: $talk for the pairs that talked before it,
# $talk_new for a pair with a newcomer. Each round crosses the group's
# connections both ways; more rounds prove no more and cost guest time
# (20 and 10, then 8 and 4, then 5 and 3, until the CI budget: issues 19
# and 22)
talk=3 talk_new=2

guest_script=$(cat <<'EOF'
out=$1 prog=$2 count_reg=$3 info=$4 mode=$5 report_wait=$6 talk=$7 talk_new=$8
export LD_PRELOAD="$count_reg $IBSHARE_PRELOAD"
# The group's socket needs a local file system: the guest's /tmp
rt=$(mktemp -d)
export UCX_IBSHARE_RUNTIME_DIR=$rt
facts=$out/facts
: > "$facts"
t0=$(date +%s.%N)

fact() { echo "$1=$2" >> "$facts"; }
elapsed() { echo "$(date +%s.%N) $t0" | awk '{printf "%.1f", $1 - $2}'; }
note() { echo "[$(elapsed) s] $*"; }

# waitfor SECONDS CMD...: polls CMD every 0.2 s until it succeeds, for
# SECONDS of the clock (a loaded guest runs fewer polls than 5 a second)
waitfor() {
    read -r wf_up wf_idle < /proc/uptime
    wf_end=$((${wf_up%.*} + $1))
    shift
    while ! "$@"; do
        read -r wf_up wf_idle < /proc/uptime
        [ "${wf_up%.*}" -lt "$wf_end" ] || return 1
        sleep 0.2
    done
}

# A zombie counts as gone (kill -0 would still find it)
dead() {
    dd_state=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)
    [ -z "$dd_state" ] || [ "$dd_state" = Z ]
}

pid_of() { cat "$1/pid.$2"; }

# start DIR NAME INDEX founder|member PEER...: niced, as they talk without
# a pause: the script's own probes (ibshare_info, rdma, the polls) come
# first on the guest's 2 vCPUs instead of waiting seconds for each
start() {
    st_dir=$1 st_name=$2 st_index=$3 st_role=$4
    shift 4
    nice -n 10 "$prog" "$st_dir" "$st_name" "$st_index" rxe0:1 "$mode" "$st_role" "$@" \
        > "$st_dir/$st_name.out" 2>&1 &
    echo $! > "$st_dir/pid.$st_name"
    note "started $st_name (pid $(pid_of "$st_dir" "$st_name"))"
}

published() { test -e "$1/addr.$2"; }

# reap DIR NAME SECONDS: its exit status in DIR/rc.NAME; "hang" if it had
# to be killed
reap() {
    rp_pid=$(pid_of "$1" "$2")
    if waitfor "$3" dead "$rp_pid"; then
        wait "$rp_pid"
        echo $? > "$1/rc.$2"
    else
        echo hang > "$1/rc.$2"
        kill -9 "$rp_pid"
        wait "$rp_pid"
    fi
    note "$2 exited: $(cat "$1/rc.$2")"
}

# kill9 DIR NAME: the time of death first (the survivors read it)
kill9() {
    date +%s.%N > "$1/killed.$2.tmp" && mv "$1/killed.$2.tmp" "$1/killed.$2"
    kill -9 "$(pid_of "$1" "$2")"
    note "killed $2"
    reap "$1" "$2" 10
}

# rounds DIR NAME PEER: rounds NAME completed with PEER
rounds() {
    rd_n=$(awk -v p="$3" '$1 == "peer" && $2 == p { print $4 }' \
           "$1/progress.$2" 2>/dev/null)
    echo "${rd_n:-0}"
}

# at_least DIR NAME PEER MIN
at_least() { [ "$(rounds "$1" "$2" "$3")" -ge "$4" ]; }

# talked SECONDS DIR MIN NAME:PEER...: each NAME made MIN more rounds with
# its PEER than now
talked() {
    tk_secs=$1 tk_dir=$2 tk_min=$3
    shift 3
    tk_goals=
    for tk_pair in "$@"; do
        tk_goals="$tk_goals $tk_pair:$(($(rounds "$tk_dir" "${tk_pair%:*}" \
                                          "${tk_pair#*:}") + tk_min))"
    done
    waitfor "$tk_secs" talked_goals "$tk_dir" $tk_goals
}

talked_goals() {
    tg_dir=$1
    shift
    for tg in "$@"; do
        tg_name=${tg%%:*} tg_rest=${tg#*:}
        at_least "$tg_dir" "$tg_name" "${tg_rest%:*}" "${tg_rest#*:}" ||
            return 1
    done
}

# snap TAG DIR NAME:PEER...: facts TAG_NAME_PEER=rounds
snap() {
    sn_tag=$1 sn_dir=$2
    shift 2
    for sn_pair in "$@"; do
        fact "${sn_tag}_${sn_pair%:*}_${sn_pair#*:}" \
             "$(rounds "$sn_dir" "${sn_pair%:*}" "${sn_pair#*:}")"
    done
}

# info TAG: ibshare_info into info.TAG, and facts TAG_pd, _mr, _qp, _cq:
# the kernel's objects beyond the baseline at the time
info() {
    env -u LD_PRELOAD "$info" -d "$rt" > "$out/info.$1" 2>&1
    resources "$1"
    while read -r if_res if_count; do
        fact "${1%%.*}_${1#*.}_$if_res" \
             $((if_count - $(sed -n "s/^$if_res //p" "$out/res.base")))
    done < "$out/res.$1"
}

# leader_of KEY TAG: the leader pid ibshare_info showed for the job's group
leader_of() {
    awk -v key="'$1'" '
        /^group of job / { g = ($4 == key) }
        g && /leader pid:/ { print $3 }' "$out/info.$2"
}

# slice_of KEY TAG PID
slice_of() {
    awk -v key="'$1'" -v pid="$3" '
        /^group of job / { g = ($4 == key) }
        g && $1 == "pid" && $2 == pid { print $4 }' "$out/info.$2"
}

# mode_of KEY TAG PID: the member's mode column
mode_of() {
    awk -v key="'$1'" -v pid="$3" '
        /^group of job / { g = ($4 == key) }
        g && $1 == "pid" && $2 == pid { print $5 }' "$out/info.$2"
}

group_mode() {
    awk -v key="'$1'" '
        /^group of job / { g = ($4 == key) }
        g && $1 == "mode:" { print $2 }' "$out/info.$2"
}

retired() {
    rt_n=$(awk -v key="'$1'" '
        /^group of job / { g = ($4 == key) }
        g && $1 == "pool:" {
            for (i = 1; i < NF; ++i) if ($(i + 1) == "retired") print $i
        }' "$out/info.$2")
    echo "${rt_n:-0}"
}

# leader_in KEY TAG PID...: ibshare_info (into info.TAG) shows one of PIDs
# as the group's leader
leader_in() {
    li_key=$1 li_tag=$2
    shift 2
    info "$li_tag"
    li_leader=$(leader_of "$li_key" "$li_tag")
    for li_pid in "$@"; do
        [ "$li_leader" = "$li_pid" ] && return 0
    done
    return 1
}

# resources TAG: lines of rdma res show pd, mr, qp, cq
resources() {
    for r in pd mr qp cq; do
        echo "$r $(rdma res show "$r" | grep -c .)"
    done > "$out/res.$1"
}

# back_to_base TAG: the tables are as at the start (polled: the kernel may
# release a file's objects a moment after the process is gone)
back_to_base() {
    resources "$1"
    cmp -s "$out/res.base" "$out/res.$1"
}

# group_info_facts KEY TAG PREFIX
group_facts() {
    fact "$3_leader" "$(leader_of "$1" "$2")"
    fact "$3_mode" "$(group_mode "$1" "$2")"
    fact "$3_retired" "$(retired "$1" "$2")"
}

# 1. Baseline
resources base
cat "$out/res.base"

# 2. The founder leaves normally
a=$out/a
mkdir -p "$a"
export UCX_IBSHARE_JOB_KEY=node-lifetime-a
start "$a" L 0 founder
waitfor 60 published "$a" L
fact a_L_published "$(published "$a" L && echo yes)"
start "$a" M1 1 member M2
start "$a" M2 2 member M1
waitfor 60 published "$a" M1
waitfor 60 published "$a" M2
talked 60 "$a" "$talk" M1:M2 M2:M1
note "M1 and M2 talk"
info a.start
group_facts node-lifetime-a a.start a_start
snap a_start "$a" M1:M2 M2:M1
fact a_pid_L "$(pid_of "$a" L)"
fact a_pid_M1 "$(pid_of "$a" M1)"
fact a_pid_M2 "$(pid_of "$a" M2)"

note "L leaves"
touch "$a/leave.L"
reap "$a" L 60
snap a_L_gone "$a" M1:M2 M2:M1
talked 30 "$a" "$talk" M1:M2 M2:M1
note "M1 and M2 talk on"
snap a_L_after "$a" M1:M2 M2:M1
waitfor 30 leader_in node-lifetime-a a.takeover \
    "$(pid_of "$a" M1)" "$(pid_of "$a" M2)"
note "ibshare_info after L left:"
cat "$out/info.a.takeover"
group_facts node-lifetime-a a.takeover a_takeover

start "$a" N1 3 member M1 M2
waitfor 60 published "$a" N1
echo N1 > "$a/peers.M1"
echo N1 > "$a/peers.M2"
talked 60 "$a" "$talk_new" N1:M1 N1:M2 M1:N1 M2:N1
note "N1, M1 and M2 talk"
snap a_N1 "$a" N1:M1 N1:M2 M1:N1 M2:N1
info a.newcomer
group_facts node-lifetime-a a.newcomer a_newcomer
fact a_N1_mode "$(mode_of node-lifetime-a a.newcomer "$(pid_of "$a" N1)")"
fact a_pid_N1 "$(pid_of "$a" N1)"

note "A stops"
touch "$a/stop"
for n in M1 M2 N1; do
    reap "$a" "$n" 90
done
waitfor 10 back_to_base after_a
cat "$out/res.after_a"

# 3. The founder is killed
b=$out/b
mkdir -p "$b"
export UCX_IBSHARE_JOB_KEY=node-lifetime-b
start "$b" L2 0 founder
waitfor 60 published "$b" L2
start "$b" M3 1 member M4
start "$b" M4 2 member M3
waitfor 60 published "$b" M3
waitfor 60 published "$b" M4
talked 60 "$b" "$talk" M3:M4 M4:M3
note "M3 and M4 talk"
info b.start
group_facts node-lifetime-b b.start b_start
fact b_pid_L2 "$(pid_of "$b" L2)"
fact b_pid_M3 "$(pid_of "$b" M3)"
fact b_pid_M4 "$(pid_of "$b" M4)"
fact b_L2_slice "$(slice_of node-lifetime-b b.start "$(pid_of "$b" L2)")"

kill9 "$b" L2
snap b_L2_gone "$b" M3:M4 M4:M3
talked 30 "$b" "$talk" M3:M4 M4:M3
note "M3 and M4 talk on"
snap b_L2_after "$b" M3:M4 M4:M3
waitfor 30 leader_in node-lifetime-b b.takeover \
    "$(pid_of "$b" M3)" "$(pid_of "$b" M4)"
# Shared mode: L2's slice is retired until the server has destroyed what
# L2 left on the group's file and cleared its record (polled: the server
# scans every 500 ms)
no_retired() { info "$1"; [ "$(retired node-lifetime-b "$1")" = 0 ]; }
waitfor 30 no_retired b.takeover
note "ibshare_info after L2 was killed:"
cat "$out/info.b.takeover"
group_facts node-lifetime-b b.takeover b_takeover

start "$b" N2 3 member M3 M4
waitfor 60 published "$b" N2
echo N2 > "$b/peers.M3"
echo N2 > "$b/peers.M4"
talked 60 "$b" "$talk_new" N2:M3 N2:M4 M3:N2 M4:N2
note "N2, M3 and M4 talk"
snap b_N2 "$b" N2:M3 N2:M4 M3:N2 M4:N2
info b.newcomer
group_facts node-lifetime-b b.newcomer b_newcomer
fact b_pid_N2 "$(pid_of "$b" N2)"
fact b_N2_mode "$(mode_of node-lifetime-b b.newcomer "$(pid_of "$b" N2)")"
fact b_N2_slice "$(slice_of node-lifetime-b b.newcomer "$(pid_of "$b" N2)")"

# 4. A member is killed
start "$b" V 4 member M3
waitfor 60 published "$b" V
echo N2 V > "$b/peers.M3"
talked 60 "$b" "$talk_new" M3:V V:M3
note "M3 and V talk"
info b.victim
fact b_pid_V "$(pid_of "$b" V)"
snap b_V_before "$b" M3:V M3:M4 M3:N2
kill9 "$b" V
snap b_V_killed "$b" M3:M4 M3:N2 M4:M3 N2:M3
reported() { grep -q "^peer V failed" "$b/M3.out"; }
if waitfor "$report_wait" reported; then
    note "M3 reported V failed"
else
    note "M3 did not report V failed in $report_wait s"
fi
snap b_V_reported "$b" M3:M4 M3:N2 M3:V
talked 30 "$b" "$talk_new" M3:M4 M3:N2 M4:M3 N2:M3
note "M3, M4 and N2 talk on"
snap b_V_after "$b" M3:M4 M3:N2 M4:M3 N2:M3
waitfor 30 no_retired b.after_kill
note "ibshare_info after V was killed:"
cat "$out/info.b.after_kill"
group_facts node-lifetime-b b.after_kill b_after_kill

# 5. Everything stops
note "B stops"
touch "$b/stop"
for n in M3 M4 N2; do
    reap "$b" "$n" 90
done
info end
waitfor 10 back_to_base final
cat "$out/res.final"
fact end_groups "$(grep -c '^group of job' "$out/info.end")"
fact guest_seconds "$(elapsed)"
EOF
)

in_guest --mem 2G --timeout 600 \
    sh -c "$guest_script" sh "$tmpdir" \
    "$IBSHARE_BUILDDIR/test/guest/node_lifetime" \
    "$IBSHARE_BUILDDIR/test/guest/.libs/libcount_reg.so" \
    "$IBSHARE_BUILDDIR/ibshare_info" "$IBSHARE_TEST_MODE" "$report_wait" \
    "$talk" "$talk_new"
check "guest ran ($IBSHARE_TEST_MODE mode)" test $? -eq 0

# The facts the guest recorded, NAME=VALUE: got NAME [DEFAULT]
cat "$tmpdir/facts"
got() {
    got_value=$(sed -n "s/^$1=//p" "$tmpdir/facts" | tail -n 1)
    echo "${got_value:-${2:-}}"
}

a=$tmpdir/a
b=$tmpdir/b
mode=$IBSHARE_TEST_MODE
if [ "$mode" = shared ]; then member_regs=0; else member_regs=1; fi

# proc_ok DIR NAME REGS: it exited 0, every check passed, 0 errors, REGS
# registrations, every fd closed
proc_ok() {
    test "$(cat "$1/rc.$2" 2>/dev/null)" = 0 &&
    grep -q "^rounds: [0-9]* errors: 0\$" "$1/$2.out" &&
    grep -q "^registrations: $3\$" "$1/$2.out" &&
    grep -q "closed every fd it opened" "$1/$2.out" &&
    ! grep -q "^FAIL" "$1/$2.out"
}

show() {
    echo "--- $1/$2.out (rc $(cat "$1/rc.$2" 2>/dev/null)):"
    grep -v '^ok:' "$1/$2.out" | grep -v '^peer .* added$' | head -30
}

for n in L M1 M2 N1; do show "$a" "$n"; done
for n in L2 M3 M4 N2 V; do show "$b" "$n"; done

for tag in a.start a.newcomer b.start b.newcomer b.victim end; do
    echo "--- ibshare_info ($tag):"
    sed -n '/^group of job/,$p' "$tmpdir/info.$tag"
done
echo "resources before / after phase A / at the end:"
paste "$tmpdir/res.base" "$tmpdir/res.after_a" "$tmpdir/res.final"


# 2. The founder leaves normally
check "A: the founder L published its address" test "$(got a_L_published)" = yes
check "A: L founded and serves the group ($(got a_start_mode) mode, leader pid $(got a_start_leader))" \
      sh -c "test '$(got a_start_leader)' = '$(got a_pid_L)' && test '$(got a_start_mode)' = '$mode'"
# objects TAG MEMBERS: the kernel held one PD and one MR for the group in
# shared mode, one of each per member in fallback mode
objects() {
    if [ "$mode" = shared ]; then ob_want=1; else ob_want=$2; fi
    test "$(got "${1}_pd")" = "$ob_want" && test "$(got "${1}_mr")" = "$ob_want"
}
objects_desc() {
    if [ "$mode" = shared ]; then ob_want=1; else ob_want=$2; fi
    echo "the kernel holds $ob_want PD(s) and MR(s) of the group ($(got "${1}_pd") and $(got "${1}_mr") beyond the baseline; QPs $(got "${1}_qp"), CQs $(got "${1}_cq"))"
}

check "A: with L, M1 and M2: $(objects_desc a_start 3)" objects a_start 3
check "A: M1 and M2 talk ($(got a_start_M1_M2) and $(got a_start_M2_M1) rounds)" \
      sh -c "test $(got a_start_M1_M2 0) -ge $talk && test $(got a_start_M2_M1 0) -ge $talk"
check "A: L left normally (exit 0, every check passed, 1 registration)" \
      proc_ok "$a" L 1
check "A: M1 and M2 kept making rounds after L was gone (M1: $(got a_L_gone_M1_M2) -> $(got a_L_after_M1_M2), M2: $(got a_L_gone_M2_M1) -> $(got a_L_after_M2_M1))" \
      sh -c "test $(got a_L_after_M1_M2 0) -ge $(($(got a_L_gone_M1_M2 0) + talk)) &&
             test $(got a_L_after_M2_M1 0) -ge $(($(got a_L_gone_M2_M1 0) + talk))"
check "A: ibshare_info shows M1 or M2 as the leader after L left ($(got a_takeover_leader); M1 $(got a_pid_M1), M2 $(got a_pid_M2))" \
      sh -c "test '$(got a_takeover_leader)' = '$(got a_pid_M1)' || test '$(got a_takeover_leader)' = '$(got a_pid_M2)'"
check "A: after L left, with M1 and M2: $(objects_desc a_takeover 2)" \
      objects a_takeover 2
check "A: with M1, M2 and N1: $(objects_desc a_newcomer 3)" \
      objects a_newcomer 3
check "A: the newcomer N1 joined in $mode mode (ibshare_info: '$(got a_N1_mode)')" \
      test "$(got a_N1_mode)" = "$mode"
check "A: N1 had made $member_regs registration(s) when it had joined ($mode mode)" \
      grep -q "^ok: .*: joined the group ($mode mode, member) in .* after $member_regs registration" "$a/N1.out"
check "A: N1 talks to M1 and M2 ($(got a_N1_N1_M1), $(got a_N1_N1_M2) rounds) and they to it ($(got a_N1_M1_N1), $(got a_N1_M2_N1))" \
      sh -c "test $(got a_N1_N1_M1 0) -ge $talk_new && test $(got a_N1_N1_M2 0) -ge $talk_new &&
             test $(got a_N1_M1_N1 0) -ge $talk_new && test $(got a_N1_M2_N1 0) -ge $talk_new"
for n in M1 M2 N1; do
    check "A: $n exited 0 with 0 errors, every byte checked, $member_regs registration(s), every fd closed" \
          proc_ok "$a" "$n" "$member_regs"
done
check "A: after the group the kernel's PD, MR, QP and CQ tables are as before" \
      cmp -s "$tmpdir/res.base" "$tmpdir/res.after_a"

# 3. The founder is killed
check "B: L2 founded and serves the group ($(got b_start_mode) mode, leader pid $(got b_start_leader))" \
      sh -c "test '$(got b_start_leader)' = '$(got b_pid_L2)' && test '$(got b_start_mode)' = '$mode'"
check "B: with L2, M3 and M4: $(objects_desc b_start 3)" objects b_start 3
check "B: L2 had made 1 registration when it had founded the group" \
      grep -q "^ok: .*: joined the group ($mode mode, founder) in .* after 1 registration" "$b/L2.out"
check "B: L2 was killed (exit status $(cat "$b/rc.L2"))" \
      test "$(cat "$b/rc.L2")" = 137
check "B: M3 and M4 kept making rounds after L2 was killed (M3: $(got b_L2_gone_M3_M4) -> $(got b_L2_after_M3_M4), M4: $(got b_L2_gone_M4_M3) -> $(got b_L2_after_M4_M3))" \
      sh -c "test $(got b_L2_after_M3_M4 0) -ge $(($(got b_L2_gone_M3_M4 0) + talk)) &&
             test $(got b_L2_after_M4_M3 0) -ge $(($(got b_L2_gone_M4_M3 0) + talk))"
check "B: ibshare_info shows M3 or M4 as the leader after L2's death ($(got b_takeover_leader); M3 $(got b_pid_M3), M4 $(got b_pid_M4))" \
      sh -c "test '$(got b_takeover_leader)' = '$(got b_pid_M3)' || test '$(got b_takeover_leader)' = '$(got b_pid_M4)'"
check "B: after L2's death, with M3 and M4: $(objects_desc b_takeover 2)" \
      objects b_takeover 2
check "B: with M3, M4 and N2: $(objects_desc b_newcomer 3)" \
      objects b_newcomer 3
# (shared mode: L2's objects destroyed by the server, its slice free again)
check "B: ibshare_info shows no retired slice after L2's death in $mode mode ($(got b_takeover_retired))" \
      test "$(got b_takeover_retired)" = 0
check "B: the newcomer N2 joined in $mode mode (ibshare_info: '$(got b_N2_mode)')" \
      test "$(got b_N2_mode)" = "$mode"
check "B: N2 had made $member_regs registration(s) when it had joined ($mode mode)" \
      grep -q "^ok: .*: joined the group ($mode mode, member) in .* after $member_regs registration" "$b/N2.out"
if [ "$mode" = shared ]; then
    check "B: N2 got a slice (slice $(got b_N2_slice); L2's, $(got b_L2_slice), was free again)" \
          test -n "$(got b_N2_slice)"
fi
check "B: N2 talks to M3 and M4 ($(got b_N2_N2_M3), $(got b_N2_N2_M4) rounds) and they to it ($(got b_N2_M3_N2), $(got b_N2_M4_N2))" \
      sh -c "test $(got b_N2_N2_M3 0) -ge $talk_new && test $(got b_N2_N2_M4 0) -ge $talk_new &&
             test $(got b_N2_M3_N2 0) -ge $talk_new && test $(got b_N2_M4_N2 0) -ge $talk_new"

# 4. A member is killed
check "B: M3 talked to V before V was killed ($(got b_V_before_M3_V) rounds)" \
      test "$(got b_V_before_M3_V 0)" -ge $talk_new
check "B: V had made $member_regs registration(s) when it had joined ($mode mode)" \
      grep -q "^ok: .*: joined the group ($mode mode, member) in .* after $member_regs registration" "$b/V.out"
check "B: with M3, M4, N2 and V: $(objects_desc b_victim 4)" objects b_victim 4
check "B: V was killed (exit status $(cat "$b/rc.V"))" \
      test "$(cat "$b/rc.V")" = 137
report=$(sed -n 's/^peer V report time: \([0-9.-]*\) s$/\1/p' "$b/M3.out" | head -1)
grep "^peer V failed" "$b/M3.out" | head -1
check "B: M3 reported V failed (report time: ${report:-none} s after the kill)" \
      grep -q "^peer V failed" "$b/M3.out"
check "B: M3 reported V's death within $bound s (${report:-none})" \
      sh -c "test -n '$report' && awk 'BEGIN { exit !($report <= $bound) }'"
check "B: M3 kept talking to M4 and N2 after it reported V (or gave up waiting for the report) (with M4: $(got b_V_reported_M3_M4) -> $(got b_V_after_M3_M4), with N2: $(got b_V_reported_M3_N2) -> $(got b_V_after_M3_N2))" \
      sh -c "test $(got b_V_after_M3_M4 0) -ge $(($(got b_V_reported_M3_M4 0) + talk_new)) &&
             test $(got b_V_after_M3_N2 0) -ge $(($(got b_V_reported_M3_N2 0) + talk_new))"
check "B: M4 and N2 kept talking to M3 (M4: $(got b_V_killed_M4_M3) -> $(got b_V_after_M4_M3), N2: $(got b_V_killed_N2_M3) -> $(got b_V_after_N2_M3))" \
      sh -c "test $(got b_V_after_M4_M3 0) -ge $(($(got b_V_killed_M4_M3 0) + talk_new)) &&
             test $(got b_V_after_N2_M3 0) -ge $(($(got b_V_killed_N2_M3 0) + talk_new))"
check "B: after V's death, with M3, M4 and N2: $(objects_desc b_after_kill 3)" \
      objects b_after_kill 3
check "B: ibshare_info shows no retired slice after V's death either ($(got b_after_kill_retired))" \
      test "$(got b_after_kill_retired)" = 0

# 5. Everything stops
unexpected=$(cat "$a"/*.out "$b"/*.out | grep -c "failed without being killed")
check "no process saw a peer fail that was not killed ($unexpected)" \
      test "$unexpected" -eq 0
for n in M3 M4 N2; do
    check "B: $n exited 0 with 0 errors, every byte checked, $member_regs registration(s), every fd closed" \
          proc_ok "$b" "$n" "$member_regs"
done
warnings=$(cat "$a"/*.out "$b"/*.out | grep -c "UCX  \(WARN\|ERROR\)")
cat "$a"/*.out "$b"/*.out | grep "UCX  \(WARN\|ERROR\)" | head -10
check "no process logged a UCX warning or error ($warnings)" \
      test "$warnings" -eq 0
hangs=$(cat "$a"/rc.* "$b"/rc.* | grep -c hang)
check "no process hung ($hangs had to be killed)" test "$hangs" -eq 0
check "after the last process ibshare_info shows no group ($(got end_groups))" \
      test "$(got end_groups 1)" -eq 0
check "after the last process the kernel's PD, MR, QP and CQ tables are as before" \
      cmp -s "$tmpdir/res.base" "$tmpdir/res.final"
echo "guest script: $(got guest_seconds ?) s"
finish
