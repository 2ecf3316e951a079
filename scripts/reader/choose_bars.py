"""The settings of a replay grid that meet the answer tier's targets on the choosing sets, best first (issue 68).

    python3 scripts/reader/choose_bars.py GRID.json [--limit NAME=MAX_HALLUCINATION:MIN_COVERAGE ...]
        [--kind-max RATE] [--by NAME] [--top N]

GRID.json is what `attest-lab replay --json` writes (scripts/reader/try-pair.sh: OUT/grid.json); a set is named by
its per-question file's stem (slice, company-dev, reddit-slice). The limits default to the issue's targets, read
on the sets a pair's bars are chosen on — squad-dev's slice like squad-dev (hallucination <= 2% at >= 75%
coverage), company dev like the company test (<= 5% at >= 85%, every kind of text <= 10%), shift-reddit's slice
like shift-reddit (<= 5% at >= 40%) — and the passing settings are ranked by the coverage of `--by` (the squad-dev
slice: the unmet target), then by the sum of every set's coverage. A set the grid does not hold is an error; a
set with no limit is shown, not judged. A slice's hallucination is a few questions (102 and 149 unanswerable ones
in the `--every 4` / `--every 2` slices: one is 0.7-1 point), so a setting at its limit is at the sample's mercy:
held out, a reddit slice's 4.0% came back 7.7% (docs/decisions/near-misses.md).
"""

import argparse
import json
import pathlib
import sys

DEFAULT_LIMITS = {"slice": (0.02, 0.75), "company-dev": (0.05, 0.85), "reddit-slice": (0.05, 0.40)}


def parse_limit(text):
    """`NAME=MAX_HALLUCINATION:MIN_COVERAGE`, rates in 0..1."""
    try:
        name, rates = text.split("=", 1)
        hallucination, coverage = (float(x) for x in rates.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: NAME=MAX_HALLUCINATION:MIN_COVERAGE, e.g. slice=0.02:0.75")
    if not (0 <= hallucination <= 1 and 0 <= coverage <= 1):
        raise argparse.ArgumentTypeError(f"{text!r}: rates are between 0 and 1")
    return name, (hallucination, coverage)


def sets_of(row):
    """{set name: figures} of one grid row."""
    return {pathlib.Path(s["file"]).stem: s["figures"] for s in row["sets"]}


def worst_kind(figures):
    """The highest hallucination rate among the set's kinds of text (0 without kinds)."""
    rates = [d["hallucination"]["rate"] for d in figures.get("by_domain", {}).values() if d["hallucination"]["n"]]
    return max(rates, default=0.0)


def misses(sets, limits, kind_max):
    """Why a row's sets miss the limits (empty: it meets them)."""
    out = []
    for name, (max_hallucination, min_coverage) in limits.items():
        f = sets[name]
        if f["hallucination"]["rate"] > max_hallucination:
            out.append(f"{name} hallucination {f['hallucination']['rate']:.3f} > {max_hallucination}")
        if f["coverage"]["rate"] < min_coverage:
            out.append(f"{name} coverage {f['coverage']['rate']:.3f} < {min_coverage}")
        worst = worst_kind(f)
        if worst > kind_max:
            out.append(f"{name} a kind of text at {worst:.3f} > {kind_max}")
    return out


def choose(grid, limits, kind_max, by):
    """(passing rows best first, number of rows): each passing row as (setting, {set: figures})."""
    if not grid:
        raise ValueError("the grid is empty")
    names = set(sets_of(grid[0]))
    unknown = sorted((set(limits) | {by}) - names)
    if unknown:
        raise ValueError(f"the grid holds {sorted(names)}, not {unknown}")
    rows = [(row["setting"], sets_of(row)) for row in grid]
    passing = [(setting, sets) for setting, sets in rows if not misses(sets, limits, kind_max)]
    passing.sort(key=lambda r: (r[1][by]["coverage"]["rate"], sum(f["coverage"]["rate"] for f in r[1].values())),
                 reverse=True)
    return passing, len(grid)


def line(setting, sets):
    figures = "  ".join(
        f"{name} {100 * f['hallucination']['rate']:.1f}% at {100 * f['coverage']['rate']:.1f}%"
        + (f" (worst kind {100 * worst_kind(f):.1f}%)" if f.get("by_domain") else "")
        for name, f in sorted(sets.items())
    )
    return f"{setting}\n    {figures}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("grid", type=pathlib.Path)
    p.add_argument("--limit", type=parse_limit, action="append", default=[],
                   help="NAME=MAX_HALLUCINATION:MIN_COVERAGE (replaces the defaults when given)")
    p.add_argument("--kind-max", type=float, default=0.10, help="every kind of text's hallucination at most")
    p.add_argument("--by", default="slice", help="the set whose coverage ranks the passing settings")
    p.add_argument("--top", type=int, default=10)
    args = p.parse_args(argv)
    limits = dict(args.limit) or DEFAULT_LIMITS
    try:
        passing, n = choose(json.loads(args.grid.read_text()), limits, args.kind_max, args.by)
    except (ValueError, KeyError, OSError) as e:
        sys.exit(f"choose_bars.py: {args.grid}: {e}")
    print(f"{len(passing)} of {n} settings meet " + ", ".join(
        f"{k} <= {h:g} at >= {c:g}" for k, (h, c) in limits.items()) + f", every kind <= {args.kind_max:g}")
    for setting, sets in passing[:args.top]:
        print(line(setting, sets))
    return 0 if passing else 1


if __name__ == "__main__":
    sys.exit(main())
