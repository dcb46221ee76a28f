#!/usr/bin/env python
"""Summarise a py-spy "raw" (collapsed stacks) profile: inclusive and self share per function.

    python bench/pyspy_summary.py bench/results/<stamp>/mcp_tools-uvicorn-2026-07-28.py-spy.txt [--top 40] [--grep mcp_tools]

``bench/run.py --py-spy`` records these files. Line numbers are dropped so a
function counts once however many of its lines appear.
"""

from __future__ import annotations

import argparse
import collections
import re

LINE = re.compile(r":\d+\)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--grep", help="only list functions whose name or file contains this")
    args = parser.parse_args()

    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    total = 0
    with open(args.file) as fh:
        for line in fh:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            n = int(count)
            frames = [LINE.sub(")", frame) for frame in stack.split(";")]
            total += n
            if frames[0].startswith("thread ("):
                threads[frames[0]] += n
            for frame in set(frames):
                inclusive[frame] += n
            own[frames[-1]] += n
    if not total:
        raise SystemExit("no samples")

    def show(title: str, counter: collections.Counter[str], grep: str | None = None) -> None:
        print(f"--- {title} (share of {total} samples)")
        shown = 0
        for frame, n in counter.most_common():
            if grep and grep not in frame:
                continue
            print(f"{n / total:6.1%}  {frame}")
            shown += 1
            if shown >= args.top:
                break

    if threads:
        show("threads", threads)
    show("inclusive", inclusive, args.grep)
    show("self", own, args.grep)


if __name__ == "__main__":
    main()
