# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# contrib/stats.sh - order statistics of the benchmark scripts (contrib/bench,
# contrib/bench_rma), sourced: the median and spread of a run's figures and
# the median of per-round ratios with a sign-test interval
# shellcheck shell=sh

# order_stats K: reads numbers, prints "MEDIAN SPREAD LOW HIGH" (SPREAD:
# (max - min) / median, in percent; LOW, HIGH: the K-th smallest and
# largest), or nothing
order_stats() {
    sort -g | awk -v k="$1" '
        { v[NR] = $1 }
        END {
            if (NR == 0) exit
            m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            print m, 100 * (v[NR] - v[1]) / m, v[k], v[NR + 1 - k]
        }'
}

# stats: reads numbers, prints "MEDIAN SPREAD" as the table shows them
stats() {
    order_stats 1 | awk '{ printf "%.2f %.0f\n", $1, $2 }'
}

# paired K: reads "A B" lines (one round each), prints "MEDIAN LOW HIGH" of
# the ratios A/B: their median and the K-th smallest and largest
paired() {
    awk '{ print $1 / $2 }' | order_stats "$1" |
        awk '{ printf "%.3f %.2f %.2f\n", $1, $3, $4 }'
}

# interval_rank N: "K COVERAGE": the K-th smallest and the K-th largest of N
# per-round ratios bound their median with probability COVERAGE (percent;
# sign test: each ratio falls below the median with probability 1/2). K is
# the largest with COVERAGE >= 95 %, or 1 (the extremes) when N < 6.
interval_rank() {
    awk -v n="$1" 'BEGIN {
        # p: P(Bin(n, 1/2) < k), the chance that K-th smallest is above the
        # median; c: C(n, k), what the next k adds to it
        k = 0; p = 0; c = 1
        while (1 - 2 * (p + c / 2 ^ n) >= 0.95) {
            p += c / 2 ^ n
            k++
            c = c * (n - k + 1) / k
        }
        if (k == 0) { k = 1; p = 1 / 2 ^ n }
        printf "%d %.1f\n", k, 100 * (1 - 2 * p)
    }'
}
