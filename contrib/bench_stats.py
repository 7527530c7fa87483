#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
"""contrib/bench_stats.py - the statistics of the benchmark scripts
(contrib/bench, contrib/bench_scale, contrib/bench_rma): medians, spreads,
order statistics, per-round ratios with their sign-test interval, and
resampling. The scripts run the rounds and hand it the raw figures on
stdin, one round a line; it prints what their tables show. Standard library
only; test/host/bench_stats.sh tests it against known inputs.

    bench_stats.py [--by N] COMMAND [ARG...] < FIGURES

COMMAND, and what it prints (nothing for no figures):
  median [D]    reads numbers: their median (with D, to D decimals)
  spread        reads numbers: (max - min) / median in percent, "12%"
  stats         reads numbers: "MEDIAN SPREAD" as contrib/bench's table
                shows them (2 decimals, whole percent)
  order K       reads numbers: "LOW HIGH", the K-th smallest and the K-th
                largest ("-" where there are fewer than K)
  range         reads numbers: "MIN-MAX", or "MIN" when they are equal
  paired K      reads "A B" lines (one round each): "MEDIAN LOW HIGH" of the
                per-round ratios A/B, their median (3 decimals) and their
                K-th smallest and K-th largest (2 decimals), or "- -"
                with fewer than 2K - 1 lines (no interval at that rank)
  rank N        (no input) "K COVERAGE": the K-th smallest and K-th largest
                of N per-round ratios hold their median with probability
                COVERAGE % (sign test: each ratio is below the median with
                probability 1/2); K is the largest with COVERAGE >= 95 %, or
                1 (the extremes) when none is
  resample lat|bw DRAWS [SEED]
                reads "A B" lines: draws that many rounds with replacement
                DRAWS times and prints in how many percent of the draws the
                median of A / the median of B, then the median of the
                per-round A/B, misses the acceptance (lat: ratio <= 1.10; bw:
                ratio >= 0.90), "7% 0%". The draws come from Python's
                random.Random(SEED), SEED 1 unless given, a fresh generator
                for every group: the same figures give the same percentages.

--by N: the first N fields of every line are a key (a row of the table);
COMMAND runs on each key's lines, in the order the keys first come, and
prints "KEY OUTPUT" for each that has figures. One run of the tool then
serves a whole table.

Numbers are decimal ("12", "-0.5", "2.5e+03"); blank lines are skipped.
Anything else (a word, nan, a missing or extra field, a zero B) is an error:
a message on stderr and exit status 1 (2 for a wrong command line).

Where the figures came through awk before (mawk, Debian's), the tool keeps
its steps, so that a table prints the same figures for the same rounds: a
median of an odd count is the figure as it was read; a computed one (the
mean of the middle two, a ratio A/B before its median is taken, the spread
of stats) is the number as awk printed it, an integer when it is one
(within +-2^31) and else 6 significant digits ("%.6g"), before the table's
own rounding.
"""

import random
import re
import statistics
import sys

SEED = 1
PROG = "bench_stats.py"
NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# mawk prints an integral number as an integer up to its int range
AWK_MAX_INT = 2 ** 31 - 1


class Error(Exception):
    """Bad input (status 1) or a bad command line (status 2)."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def awk_str(x):
    """The number as awk's print writes it (CONVFMT/OFMT "%.6g")."""
    if x == int(x) and -AWK_MAX_INT <= x <= AWK_MAX_INT:
        return "%d" % x
    return "%.6g" % x


class Figure:
    """A figure as read (its text) and its value."""

    __slots__ = ("text", "value")

    def __init__(self, text, value=None):
        self.text = text
        self.value = float(text) if value is None else value


def figure(text, line):
    if not NUMBER.fullmatch(text):
        raise Error("line %d: not a number: '%s'" % (line, text))
    return Figure(text)


def ordered(figures):
    # (as sort -g: by value, equal values by their text)
    return sorted(figures, key=lambda f: (f.value, f.text))


def median_text(figures):
    """The median of sorted figures as awk printed it: the middle figure's
    text, or the mean of the middle two."""
    n = len(figures)
    if n % 2:
        return figures[n // 2].text
    return awk_str((figures[n // 2 - 1].value + figures[n // 2].value) / 2)


def spread_of(figures):
    """100 (max - min) / median of sorted figures; 0 for a zero median."""
    m = statistics.median(f.value for f in figures)
    return 100 * (figures[-1].value - figures[0].value) / m if m else 0.0


def kth(figures, k):
    """The k-th smallest and k-th largest of sorted figures, or None."""
    if 1 <= k <= len(figures):
        return figures[k - 1], figures[-k]
    return None, None


def count(text, what):
    if not re.fullmatch(r"[0-9]+", text):
        raise Error("%s wants a whole number, not '%s'" % (what, text), 2)
    return int(text)


def ratios(rows):
    """The per-round ratios A/B, as awk printed them."""
    return [Figure(awk_str(a.value / b.value)) for a, b in rows]


# ---------------------------------------------------------------- commands
# Each takes its arguments and the figures (a list of one Figure, or of an
# (A, B) pair, a line) and returns the line to print, or None.


def cmd_median(args, rows):
    digits = count(args[0], "median D") if args else None
    if not rows:
        return None
    m = median_text(ordered(rows))
    return m if digits is None else "%.*f" % (digits, float(m))


def cmd_spread(args, rows):
    if not rows:
        return None
    return "%.0f%%" % spread_of(ordered(rows))


def cmd_stats(args, rows):
    if not rows:
        return None
    s = ordered(rows)
    return "%.2f %.0f" % (float(median_text(s)), float(awk_str(spread_of(s))))


def cmd_order(args, rows):
    k = count(args[0], "order K")
    if not rows:
        return None
    return " ".join("-" if f is None else f.text for f in kth(ordered(rows), k))


def cmd_range(args, rows):
    if not rows:
        return None
    s = ordered(rows)
    if s[0].value == s[-1].value:
        return s[0].text
    return "%s-%s" % (s[0].text, s[-1].text)


def cmd_paired(args, rows):
    k = count(args[0], "paired K")
    if not rows:
        return None
    s = ordered(ratios(rows))
    # Fewer than 2K - 1 rounds (an operation missing in some): the K-th
    # smallest would lie above the K-th largest, and there is no interval
    if 2 * k > len(s) + 1:
        return "%.3f - -" % float(median_text(s))
    low, high = kth(s, k)
    return "%.3f %.2f %.2f" % (float(median_text(s)), low.value, high.value)


def cmd_rank(args, rows):
    n = count(args[0], "rank N")
    if n > 1000:
        raise Error("rank N: at most 1000 rounds", 2)
    # p: P(Bin(n, 1/2) < k), the chance that the k-th smallest is above the
    # median; c: C(n, k), what the next k adds to it
    k, p, c = 0, 0.0, 1.0
    while 1 - 2 * (p + c / 2.0 ** n) >= 0.95:
        p += c / 2.0 ** n
        k += 1
        c = c * (n - k + 1) / k
    if k == 0:
        k, p = 1, 1 / 2.0 ** n
    return "%d %.1f" % (k, 100 * (1 - 2 * p))


def cmd_resample(args, rows):
    if args[0] not in ("lat", "bw"):
        raise Error("resample wants lat or bw, not '%s'" % args[0], 2)
    draws = count(args[1], "resample DRAWS")
    seed = count(args[2], "resample SEED") if len(args) > 2 else SEED
    if draws == 0:
        raise Error("resample DRAWS: at least 1", 2)
    if not rows:
        return None

    def miss(r):
        return r > 1.10 if args[0] == "lat" else r < 0.90

    rng = random.Random(seed)
    a = [x.value for x, _ in rows]
    b = [y.value for _, y in rows]
    n = len(rows)
    m1 = m2 = 0
    for _ in range(draws):
        pick = [rng.randrange(n) for _ in range(n)]
        m1 += miss(statistics.median(a[i] for i in pick) /
                   statistics.median(b[i] for i in pick))
        m2 += miss(statistics.median(a[i] / b[i] for i in pick))
    return "%.0f%% %.0f%%" % (100 * m1 / draws, 100 * m2 / draws)


# name: (function, fields a line (0: no input), fewest and most arguments)
COMMANDS = {
    "median": (cmd_median, 1, 0, 1),
    "spread": (cmd_spread, 1, 0, 0),
    "stats": (cmd_stats, 1, 0, 0),
    "order": (cmd_order, 1, 1, 1),
    "range": (cmd_range, 1, 0, 0),
    "paired": (cmd_paired, 2, 1, 1),
    "rank": (cmd_rank, 0, 1, 1),
    "resample": (cmd_resample, 2, 2, 3),
}


def read_groups(stream, by, fields):
    """{key: [row, ...]} in the order the keys first come; a row is a
    Figure (fields 1) or an (A, B) pair of them (fields 2)."""
    groups = {}
    for line_no, line in enumerate(stream, 1):
        words = line.split()
        if not words:
            continue
        if len(words) != by + fields:
            raise Error("line %d: %d field(s), not %d: '%s'" %
                        (line_no, len(words), by + fields, line.strip()))
        row = [figure(w, line_no) for w in words[by:]]
        if fields == 2 and row[1].value == 0:
            raise Error("line %d: B is 0 (no ratio A/B): '%s'" %
                        (line_no, line.strip()))
        groups.setdefault(" ".join(words[:by]), []).append(
            row[0] if fields == 1 else tuple(row))
    return groups


def usage():
    return __doc__.split("\n\n")[1].strip()


def main(argv):
    by = None
    if argv[:1] == ["--by"]:
        if len(argv) < 2:
            raise Error("--by wants a number of key fields", 2)
        by = count(argv[1], "--by N")
        if by == 0:
            raise Error("--by N: at least 1", 2)
        argv = argv[2:]
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    if not argv or argv[0] not in COMMANDS:
        raise Error("no such command: '%s' (%s)" %
                    (argv[0] if argv else "", ", ".join(COMMANDS)), 2)
    name, args = argv[0], argv[1:]
    func, fields, fewest, most = COMMANDS[name]
    if not fewest <= len(args) <= most:
        raise Error("%s: wrong number of arguments (%s)" % (name, usage()), 2)
    if fields == 0:
        if by is not None:
            raise Error("%s reads no figures: no --by" % name, 2)
        print(func(args, []))
        return 0
    try:
        groups = read_groups(sys.stdin, by or 0, fields)
    except Error as e:
        raise Error("%s: %s" % (name, e), e.status)
    if by is None:
        out = func(args, groups.get("", []))
        if out is not None:
            print(out)
        return 0
    for key, rows in groups.items():
        out = func(args, rows)
        if out is not None:
            print(key, out)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Error as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        sys.exit(e.status)
    except (BrokenPipeError, KeyboardInterrupt):
        sys.exit(1)
