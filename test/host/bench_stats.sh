#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# contrib/bench_stats.py, the statistics of contrib/bench, bench_scale and
# bench_rma, against known inputs: every command's figures (odd and even
# medians, spreads, order statistics, ranges, per-round ratios with their
# sign-test interval, the sign test's rank and coverage, resampling with
# its fixed seed), the awk's steps it keeps (6 significant digits before
# the table's rounding), --by's groups, empty input, and malformed input:
# a one-line message and a non-zero status, never a traceback.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

stats=$IBSHARE_SRCDIR/contrib/bench_stats.py
if [ ! -x /usr/bin/python3 ]; then
    echo "$test_name: no /usr/bin/python3 (contrib/install-deps installs it)"
    exit 99
fi

# gives DESCRIPTION EXPECTED INPUT COMMAND...: COMMAND (bench_stats.py's)
# with INPUT (printf %b) on stdin prints EXPECTED, nothing on stderr, and
# exits 0
gives() {
    g_desc=$1 g_want=$2 g_in=$3
    shift 3
    g_got=$(printf '%b' "$g_in" | "$stats" "$@" 2> "$tmpdir/err")
    g_status=$?
    if [ "$g_status" -eq 0 ] && [ "$g_got" = "$g_want" ] &&
       [ ! -s "$tmpdir/err" ]; then
        pass "$g_desc: $*: $(echo "$g_want" | tr '\n' '|')"
    else
        fail "$g_desc: $*: got '$g_got' (status $g_status, stderr:" \
             "$(cat "$tmpdir/err")), want '$g_want'"
    fi
}

# refuses DESCRIPTION STATUS PATTERN INPUT COMMAND...: COMMAND exits with
# STATUS, prints nothing on stdout and one line on stderr that holds
# PATTERN (grep -E), no traceback
refuses() {
    r_desc=$1 r_want=$2 r_pattern=$3 r_in=$4
    shift 4
    printf '%b' "$r_in" | "$stats" "$@" > "$tmpdir/out" 2> "$tmpdir/err"
    r_status=$?
    if [ "$r_status" -eq "$r_want" ] && [ ! -s "$tmpdir/out" ] &&
       [ "$(grep -c . "$tmpdir/err")" -eq 1 ] &&
       grep -q -E -e "$r_pattern" "$tmpdir/err" &&
       ! grep -q Traceback "$tmpdir/err"; then
        pass "$r_desc: $*: status $r_status, $(cat "$tmpdir/err")"
    else
        fail "$r_desc: $*: status $r_status (want $r_want), stdout" \
             "'$(cat "$tmpdir/out")', stderr '$(cat "$tmpdir/err")'"
    fi
}

# median: the middle figure as read, or the mean of the middle two as awk
# printed it (an integer, or 6 significant digits)
gives "odd median" 2 '3\n1\n2\n' median
gives "odd median, the figure as read" 1.50 '3\n1.50\n0.5\n' median
gives "even median" 2.5 '3\n1\n2\n4\n' median
gives "even median, integral" 2 '1\n3\n' median
gives "even median, 6 digits" 12.3457 '12.34567\n12.34568\n' median
gives "even median beyond 2^31, 6 digits" 3e+09 '3000000000\n3000000001\n' median
gives "median of one" 7 '7\n' median
gives "median to 2 decimals" 2.50 '3\n1\n2\n4\n' median 2
gives "median to 2 decimals, through the 6 digits" 12345.70 \
    '12345.675\n12345.676\n' median 2
gives "negative figures" -1.5 '-1\n-2\n' median

# spread, stats: (max - min) / median in percent
gives "spread" 18% '10\n12\n11\n' spread
gives "spread of a zero median" 0% '0\n0\n' spread
gives "stats, odd" "11.00 18" '10\n12\n11\n' stats
gives "stats, even" "11.50 26" '10\n12\n11\n13\n' stats
gives "stats, the median through 6 digits" "12345.70 0" \
    '12345.675\n12345.676\n' stats
gives "stats of one" "24.59 0" '24.59\n' stats

# order statistics and ranges
gives "order 1: min and max" "4 9" '9\n4\n5\n' order 1
gives "order 2" "5 5" '9\n4\n5\n' order 2
gives "order beyond the count" "- -" '9\n4\n5\n' order 4
gives "order keeps the figures as read" "1.0 3.50" '3.50\n1.0\n2\n' order 1
gives "range" 4-6 '5\n4\n6\n' range
gives "range of equal figures" 4 '4\n4\n4\n' range
gives "range of equal values, written two ways" 1 '1.0\n1\n' range

# paired: the per-round ratios' median and K-th smallest and largest
gives "paired 1" "1.000 0.50 1.50" '1 2\n2 2\n3 2\n' paired 1
gives "paired 2 of 4 rounds" "2.500 2.00 3.00" \
    '1 1\n2 1\n3 1\n4 1\n' paired 2
gives "paired, a ratio of 6 digits" "0.667 0.67 0.67" '2 3\n' paired 1
gives "paired, the ratio through 6 digits (1.2345 before 3 decimals)" \
    "1.234 1.23 1.23" '1.23450004 1\n' paired 1
gives "paired, K beyond the rounds: no interval" \
    "1.500 - -" '1 1\n2 1\n' paired 3
gives "paired, K past the middle (the K-th smallest above the K-th largest)" \
    "3.000 - -" '1 1\n2 1\n3 1\n4 1\n5 1\n' paired 4
gives "paired, K at the middle of 2K - 1 rounds" "3.000 3.00 3.00" \
    '1 1\n2 1\n3 1\n4 1\n5 1\n' paired 3
gives "paired, lines with a leading blank" "1.000 1.00 1.00" ' 5 5\n' paired 1

# rank: the sign test's K and coverage (doc/bench.md: 9 rounds k = 2,
# 96.1 %; 15 rounds k = 4, 96.5 %; 30 rounds k = 10, 95.7 %)
gives "rank, 1 round" "1 0.0" '' rank 1
gives "rank, 5 rounds: the extremes" "1 93.8" '' rank 5
gives "rank, 6 rounds" "1 96.9" '' rank 6
gives "rank, 9 rounds" "2 96.1" '' rank 9
gives "rank, 15 rounds" "4 96.5" '' rank 15
gives "rank, 30 rounds" "10 95.7" '' rank 30

# resample: Python's random.Random(1), a fresh one per group: fixed figures
rounds='1 1\n1.2 1\n0.9 1.1\n1.05 1\n1.3 1\n0.8 1\n'
gives "resample lat, seed 1" "25% 25%" "$rounds" resample lat 1000
gives "resample bw, seed 7" "7% 10%" "$rounds" resample bw 1000 7
gives "resample, equal rounds never miss" "0% 0%" '5 5\n6 6\n7 7\n' \
    resample lat 100
gives "resample, rounds that always miss" "100% 100%" \
    '2 1\n3 1\n4 1\n' resample lat 100
gives "resample bw, ratios at 0.90 pass" "0% 0%" '0.9 1\n9 10\n' \
    resample bw 100
gives "resample per group: the same draws as alone" "x 25% 25%
y 0% 0%" "$(printf '%b' "$rounds" | sed 's/^/x /')\ny 5 5\n" \
    --by 1 resample lat 1000

# --by: one line per key, in the order the keys first come
gives "--by 1 median" "b 5
a 2" 'b 5\na 1\na 3\n' --by 1 median
gives "--by 2 paired" "put lat 1.000 1.00 1.00
get bw 0.500 0.50 0.50" 'put lat 2 2\nget bw 1 2\n' --by 2 paired 1
gives "--by 3 stats" "rc_share 8 window 11.00 18" \
    'rc_share 8 window 10\nrc_share 8 window 12\nrc_share 8 window 11\n' \
    --by 3 stats

# Empty input (and blank lines): nothing, status 0
for command in median spread stats range "order 1" "paired 4" \
        "resample lat 10" "--by 1 median"; do
    # shellcheck disable=SC2086  # (a command and its arguments)
    gives "empty input" "" '' $command
done
gives "blank lines only" "" '\n\n' stats
gives "blank lines skipped" 2 '1\n\n3\n' median

# Malformed input or command line: one line on stderr, status 1 or 2
refuses "a word" 1 "median: line 2: not a number: 'abc'" '1\nabc\n3\n' median
refuses "nan" 1 "not a number: 'nan'" '1\nnan\n' stats
refuses "inf" 1 "not a number: 'inf'" 'inf 1\n' paired 1
refuses "a comma" 1 "not a number: '1,5'" '1,5\n' median
refuses "two figures where one goes" 1 "line 1: 2 field\\(s\\), not 1" \
    '1 2\n' median
refuses "one figure where two go" 1 "paired: line 2: 1 field\\(s\\), not 2" \
    '1 2\n3\n' paired 1
refuses "a zero B" 1 "B is 0" '1 0\n' paired 1
refuses "a zero B in resampling" 1 "B is 0" '1 1\n1 0\n' resample lat 10
refuses "a key without figures" 1 "1 field\\(s\\), not 2" 'a\n' --by 1 median
refuses "no command" 2 "no such command" ''
refuses "an unknown command" 2 "no such command: 'mean'" '1\n' mean
refuses "K not a number" 2 "paired K wants a whole number" '1 1\n' paired x
refuses "a missing K" 2 "paired: wrong number of arguments" '1 1\n' paired
refuses "rank of a word" 2 "rank N wants a whole number" '' rank many
refuses "resample's metric" 2 "resample wants lat or bw" '1 1\n' \
    resample fast 10
refuses "resample without draws" 2 "at least 1" '1 1\n' resample lat 0
refuses "--by 0" 2 "--by N: at least 1" '1\n' --by 0 median
refuses "--by a word" 2 "--by N wants a whole number" '1\n' --by x median
refuses "rank reads nothing: no --by" 2 "no --by" '' --by 1 rank 5

# --help prints the commands
"$stats" --help > "$tmpdir/help" 2>&1
check "--help names every command" sh -c "for c in median spread stats \
    order range paired rank resample; do grep -q \"^  \$c \" '$tmpdir/help' ||
    exit 1; done"
finish
