# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# contrib/bench_lib.sh - the driver that contrib/bench and contrib/bench_scale
# share, sourced: their command line, the build, the runs' directory, the
# header of the output, the guest's boot and its rounds, and the statistics
# (contrib/bench_stats.py). The script that sources it sets bench_name
# (its name in messages) and defines usage and bench_option NAME [VALUE].
# shellcheck shell=sh
# (bench_name, failed_runs: the script's; module: for the script)
# shellcheck disable=SC2154,SC2034

bench_dir=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$bench_dir/.." && pwd)

# bench_stats COMMAND...: the statistics of raw figures (bench_stats.py
# --help)
bench_stats() {
    "$bench_dir/bench_stats.py" "$@"
}

# bench_lookup FILE KEY: the rest of FILE's line that starts with the words
# KEY (bench_stats --by's output), or nothing
bench_lookup() {
    awk -v k="$2 " 'index($0, k) == 1 { print substr($0, length(k) + 1); exit }' \
        "$1"
}

# bench_fail STATUS MESSAGE...: MESSAGE on stderr, and exit with STATUS
bench_fail() {
    bf_status=$1
    shift
    echo "$bench_name: $*" >&2
    exit "$bf_status"
}

# bench_args "OPTION..." "FLAG..." ARG...: every OPTION takes a value,
# bench_option OPTION VALUE; every FLAG none, bench_option FLAG; -h and
# --help print usage
bench_args() {
    ba_options=$1 ba_flags=$2
    shift 2
    while [ $# -gt 0 ]; do
        case " $ba_options " in
        *" $1 "*)
            [ $# -ge 2 ] || bench_fail 2 "$1 needs an argument (see --help)"
            bench_option "$1" "$2"
            shift 2
            continue
            ;;
        esac
        case " $ba_flags " in
        *" $1 "*)
            bench_option "$1"
            shift
            continue
            ;;
        esac
        case $1 in
        -h | --help)
            usage
            exit 0
            ;;
        esac
        bench_fail 2 "unknown argument '$1' (see --help)"
    done
}

# bench_rounds_nodes ROUNDS NODES: both valid, or exit 2
bench_rounds_nodes() {
    case $1 in
    '' | *[!0-9]* | 0) bench_fail 2 "--rounds wants a positive number" ;;
    esac
    case $2 in
    1 | 2) ;;
    *) bench_fail 2 "--nodes wants 1 or 2" ;;
    esac
}

# bench_build UCX: build is the module's build directory: $build, made
# there (a configured one, or exit 2), else contrib/build's for UCX (system
# or 1.22); the log of make in $build/bench-make.log
bench_build() {
    if [ -n "$build" ]; then
        [ -f "$build/Makefile" ] ||
            bench_fail 2 "--build $build: not a configured build directory"
        build=$(cd "$build" && pwd) || exit
        # shellcheck disable=SC2119  # (make's default target)
        bench_make
    else
        build=$(IBSHARE_UCX=$1 "$top/contrib/build") || exit
    fi
    module=$build/.libs/libuct_ibshare.so.0
}

# bench_make [TARGET...]: make in $build, or its log and exit 1
# shellcheck disable=SC2120  # (bench_scale names a target)
bench_make() {
    if ! make -C "$build" "$@" > "$build/bench-make.log" 2>&1; then
        cat "$build/bench-make.log" >&2
        bench_fail 1 "make${1:+ $*} failed in $build"
    fi
}

# bench_out PREFIX: out is the runs' directory: $keep (made), else a
# temporary PREFIX.XXXXXX in the build tree, removed at exit
bench_out() {
    if [ -n "$keep" ]; then
        mkdir -p "$keep" || exit
        out=$(cd "$keep" && pwd) || exit
    else
        out=$(mktemp -d "$build/$1.XXXXXX") || exit
        trap 'rm -rf "$out"' EXIT
        trap 'exit 130' INT
        trap 'exit 143' TERM
    fi
}

# bench_stamp GUEST: the header's line of date, source, host and GUEST
bench_stamp() {
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); source: $(git -C "$top" \
        describe --always --dirty 2>/dev/null || echo unknown); host:" \
         "$(nproc) cores; guest: $1"
}

# bench_load WHAT: the host's load and the other QEMU guests (the guest's
# vCPUs are host threads: another busy guest stretches every time), and
# WHAT they do to the figures when there are any
bench_load() {
    bl_others=$(pgrep -c '^qemu-system' || true)
    echo "host load: $(cut -d' ' -f1-3 /proc/loadavg); other QEMU guests" \
         "running: $bl_others"
    if [ "$bl_others" -gt 0 ]; then
        echo "WARNING: another QEMU guest is running on this host; $1"
    fi
}

# bench_vm LOG VM_RUN_ARG...: one boot of contrib/vm/run in $out, its output
# also appended to LOG (/dev/null: none), then its status and time; exits
# with its status when it failed
bench_vm() {
    bv_log=$1
    shift
    bv_start=$(date +%s)
    rm -f "$out/guest.status"
    { (cd "$out" && "$top/contrib/vm/run" "$@") ||
        echo $? > "$out/guest.status"; } | tee -a "$bv_log"
    bv_status=$(cat "$out/guest.status" 2>/dev/null || echo 0)
    echo "guest: status $bv_status, $(($(date +%s) - bv_start)) s; host" \
         "load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$bv_log"
    [ "$bv_status" -eq 0 ] ||
        bench_fail "$bv_status" "the guest failed (status $bv_status)"
}

# bench_rounds ROUNDS FUNCTION (in the guest): FUNCTION ROUND for every
# round, which counts its failed runs in failed; a line for each
bench_rounds() {
    round=1
    while [ "$round" -le "$1" ]; do
        br_start=$(date +%s)
        failed=0
        "$2" "$round"
        echo "round $round of $1: $(($(date +%s) - br_start)) s," \
             "$failed failed run(s)"
        round=$((round + 1))
    done
}

# bench_error FILE: the first error line of a failed run's output
bench_error() {
    grep -h -E 'ERROR|rror|Segmentation|signal' "$1" 2>/dev/null |
        head -n 1 | sed 's/.*UCX  ERROR *//'
}

# bench_exit: exit 1 when $failed_runs runs failed, else 0
bench_exit() {
    [ "$failed_runs" -eq 0 ] || bench_fail 1 "$failed_runs run(s) failed"
    exit 0
}
