#!/usr/bin/env python3
"""Summary of one kernel's per-instruction profile: the CSV that `ncu -i REPORT --page source
--csv --print-source sass` writes (tools/gpu-profile.sh, profile_src).

    tools/ncu-sass-top.py FILE.csv [--top N] [--per N] [--ranges]

Prints the executed warp instructions (in total and per --per units, e.g. tokens or rows), the
stall samples by reason, and the N instructions with the most samples with their main reasons.
--ranges adds the instructions executed per unit between the kernel's branch targets, to see
which part of the code the instructions go to.
"""
import argparse
import csv
import sys

REASONS = ['long_sb', 'wait', 'short_sb', 'not_selected', 'barrier', 'mio', 'math', 'lg',
           'branch_resolving', 'membar', 'dispatch', 'no_inst', 'selected']


def number(text):
    try:
        return int(text)
    except ValueError:
        return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('csv')
    ap.add_argument('--top', type=int, default=20)
    ap.add_argument('--per', type=int, default=1, help='divide instruction counts by this')
    ap.add_argument('--ranges', action='store_true')
    a = ap.parse_args()

    with open(a.csv, newline='') as f:
        rows = list(csv.reader(f))
    # row 0: "Kernel Name", name; row 1: the header
    start = next((i for i, r in enumerate(rows) if r and r[0] == 'Address'), None)
    if start is None:
        sys.exit(f'{a.csv}: no "Address" header (not a --page source --csv file?)')
    header, data = rows[start], rows[start + 1:]
    col = {h: i for i, h in enumerate(header)}
    src, execd, samples = col['Source'], col['Instructions Executed'], col['Warp Stall Sampling (All Samples)']
    reasons = [r for r in REASONS if 'stall_' + r in col]

    name = rows[0][1] if rows and len(rows[0]) > 1 else '?'
    total = sum(number(r[execd]) for r in data)
    all_samples = sum(number(r[samples]) for r in data) or 1
    print(f'kernel: {name[:160]}')
    print(f'warp instructions: {total} ({total / a.per:.1f} per unit, --per {a.per}); '
          f'stall samples: {all_samples}')
    by_reason = {r: sum(number(d[col['stall_' + r]]) for d in data) for r in reasons}
    print('samples by reason: ' + ', '.join(
        f'{r} {100 * v / all_samples:.1f}%' for r, v in sorted(by_reason.items(), key=lambda x: -x[1]) if v))

    print(f'\ntop {a.top} instructions by stall samples (index, share, executions per unit, '
          f'instruction, reasons over 15% of its samples):')
    ranked = sorted(range(len(data)), key=lambda k: -number(data[k][samples]))[:a.top]
    for k in ranked:
        d = data[k]
        s = number(d[samples])
        main = ' '.join(f"{r}={number(d[col['stall_' + r]])}" for r in reasons
                        if number(d[col['stall_' + r]]) > 0.15 * s)
        print(f'{k:6d} {100 * s / all_samples:5.1f}% x{number(d[execd]) / a.per:8.2f}  '
              f'{d[src].strip()[:64]:64s} {main}')

    if a.ranges:
        # a range ends at an instruction whose execution count differs from the next one's
        print('\ninstructions per unit between changes of execution count:')
        begin, acc = 0, 0
        for k, d in enumerate(data):
            acc += number(d[execd])
            nxt = number(data[k + 1][execd]) if k + 1 < len(data) else -1
            if nxt != number(d[execd]):
                if acc:
                    print(f'{begin:6d}-{k:6d} {acc / a.per:10.1f}  {data[begin][src].strip()[:50]}')
                begin, acc = k + 1, 0


if __name__ == '__main__':
    main()
