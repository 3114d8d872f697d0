"""Write docs/results.md from a finished ``reproduce`` folder (the README's "what we found").

python scripts/write_results.py results/decided [--to docs/results.md] [--commit HASH] [--note TEXT]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rankcollapse.pipeline.results import write_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--to", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "results.md")
    ap.add_argument("--commit", default=None, help="the commit the run used (default: the one it recorded)")
    ap.add_argument("--note", default="", help="a sentence of yours, quoted on the page as not generated")
    args = ap.parse_args()
    if args.commit:  # a folder written before runs recorded their commit
        path = args.out_dir / "experiments.json"
        data = json.loads(path.read_text())
        data.setdefault("meta", {})["commit"] = args.commit
        path.write_text(json.dumps(data, indent=1))
    print(f"wrote {write_results(args.out_dir, args.to, args.note)}")


if __name__ == "__main__":
    main()
