"""Write docs/results.md from a finished ``reproduce`` folder (the README's "what we found").

python scripts/write_results.py results/decided [--to docs/results.md] [--commit HASH] [--note TEXT]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.pipeline.results import record_commit, write_results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--to", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "results.md")
    ap.add_argument("--commit", default=None, help="the commit the run used (default: the one it recorded)")
    ap.add_argument("--note", default="", help="a sentence of yours, quoted on the page as not generated")
    args = ap.parse_args()
    try:
        if args.commit:  # a folder written before runs recorded their commit: through the output layer
            record_commit(args.out_dir, args.commit)
        print(f"wrote {write_results(args.out_dir, args.to, args.note)}")
    except RankCollapseError as err:
        print(f"write_results: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
