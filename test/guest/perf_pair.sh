# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# Sourced by the guest side of perftest_uct.sh, perftest_ucp.sh, sanitizers.sh,
# multinode_uct.sh and contrib/bench, which set client_timeout and
# server_grace (seconds). The client runs here and connects to 127.0.0.1,
# unless perf_client_via (a command prefix, e.g. "node-exec node1 env
# LD_PRELOAD=...") and perf_server_host (the server's address from there)
# are set.

# perf_pair OUT NAME PORT ARGS...: a ucx_perftest server and its client (to
# 127.0.0.1:PORT), both with ARGS; another program of the same form (server:
# PROG -p PORT ARGS, client: PROG HOST -p PORT ARGS) if perf_prog names it
# (perftest's ib_write_lat, ...: contrib/bench). Leaves OUT/NAME.cli and OUT/NAME.srv (their
# output, line-buffered so that a hung run's output is kept), OUT/NAME.rc and
# OUT/NAME.srvrc (their exit status; 124: timed out; the server gets about
# server_grace seconds after the client ends, then is killed and its status is
# "killed").
perf_pair() {
    pp_out=$1/$2 pp_port=$3
    shift 3
    timeout $((client_timeout + server_grace + 30)) \
        stdbuf -oL "${perf_prog:-ucx_perftest}" -p "$pp_port" "$@" \
        > "$pp_out.srv" 2>&1 &
    pp_pid=$!
    pp_i=0
    while [ $pp_i -lt 100 ] && kill -0 "$pp_pid" 2>/dev/null &&
          ! ss -Hltn "sport = :$pp_port" | grep -q .; do
        sleep 0.1
        pp_i=$((pp_i + 1))
    done
    # shellcheck disable=SC2086  # (perf_client_via is a list of words)
    timeout "$client_timeout" ${perf_client_via:-} stdbuf -oL \
        "${perf_prog:-ucx_perftest}" "${perf_server_host:-127.0.0.1}" \
        -p "$pp_port" "$@" > "$pp_out.cli" 2>&1
    echo $? > "$pp_out.rc"
    pp_i=0
    while [ $pp_i -lt "$server_grace" ] && kill -0 "$pp_pid" 2>/dev/null; do
        sleep 1
        pp_i=$((pp_i + 1))
    done
    if kill -0 "$pp_pid" 2>/dev/null; then
        kill "$pp_pid"
        wait "$pp_pid"
        echo killed > "$pp_out.srvrc"
    else
        wait "$pp_pid"
        echo $? > "$pp_out.srvrc"
    fi
}

# perf_pairs OUT PORT: a perf_pair for each line "NAME ARGS..." of stdin, on
# ports PORT + 1, PORT + 2, ...; prints each pair's statuses and duration
perf_pairs() {
    pps_out=$1 pps_port=$2
    while read -r pps_name pps_args; do
        pps_port=$((pps_port + 1))
        pps_start=$(date +%s)
        # shellcheck disable=SC2086  # (a list of options)
        perf_pair "$pps_out" "$pps_name" "$pps_port" $pps_args
        echo "$pps_name: client status $(cat "$pps_out/$pps_name.rc")," \
             "server status $(cat "$pps_out/$pps_name.srvrc")," \
             "$(($(date +%s) - pps_start)) s"
    done
}

# left_to_sanitizers NAMES: the case lines of stdin ("NAME ..."), less the
# cases named in NAMES in shared mode's default run (IBSHARE_TEST_MODE
# shared, IBSHARE_TEST_LONG not 1): sanitizers-shared.sh runs those pairs
# with the same options, in the same mode, on the same UCX, in every
# contrib/check (CI's time); all of them run in the long run
left_to_sanitizers() {
    if [ "${IBSHARE_TEST_MODE:-}" = shared ] &&
       [ "${IBSHARE_TEST_LONG:-0}" != 1 ]; then
        awk -v names=" $(echo "$1" | tr '\n' ' ') " \
            'index(names, " " $1 " ") == 0'
    else
        cat
    fi
}
