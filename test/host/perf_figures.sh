#!/bin/sh
# figures_ok (test/lib.sh), the guest tests' reading of a ucx_perftest
# "Final:" row: the last interval's averages may be nan (CI's multinode_uct
# failed once on "1000 11006.000 -nan 12081.251 -nan 5.17 -nan 83", a
# complete run); an overall figure or the percentile that is not a number,
# missing iterations, or a zero overall figure from 1 KiB on still fail.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

accepts() {
    check "accepted: $*" figures_ok "$@"
}
refuses() {
    ! figures_ok "$@"
    check "refused: $*" test $? -eq 0
}

accepts 65536 1000 1000 11006.000 -nan 12081.251 -nan 5.17 -nan 83
accepts 65536 1000 1000 11006.000 12.0 12081.251 4.1 5.17 3 83
accepts 8 1000 1000 16.000 16.2 16.5 0.5 0.00 61000 60000
refuses 65536 1000 1000 11006.000 12.0 -nan 4.1 5.17 3 83
refuses 65536 1000 1000 11006.000 12.0 12081.251 4.1 -nan 3 83
refuses 65536 1000 1000 11006.000 12.0 12081.251 4.1 5.17 3 -nan
refuses 65536 1000 1000 -nan 12.0 12081.251 4.1 5.17 3 83
refuses 65536 1000 999 11006.000 12.0 12081.251 4.1 5.17 3 83
refuses 65536 1000 1000 11006.000 12.0 12081.251 4.1 0.00 3 83
refuses 8 1000 1000 16.000 inf 16.5 0.5 0.00 61000 60000
refuses 8 1000 1000 16.000 16.2 16.5 0.5 0.00 61000
finish
