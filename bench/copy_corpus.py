#!/usr/bin/env python3
"""Writes the corpus a copying target trains on (bench/spec_decode.sh, TARGET_CORPUS=copy).

  bench/copy_corpus.py OUT [PAIRS] [SEED]

A `small` model trained a few hundred steps on the bundled corpus alone loops on
its own text after any prompt; it never copies what its prompt quotes, so the
n-gram rows of the speculative benchmark would measure drafting on its loops,
not on quotations (docs/inference.md, "Measured" under "Speculative decoding"). This
corpus teaches copying by showing it:
  - the bundled corpus (data/kjv/kjv.txt), whole;
  - this repository's C++ sources under src/, except src/zaya/infer, whose
    files the benchmark's code prompts quote (so those stay unseen);
  - PAIRS (default 6000) blocks written twice: half are 3 consecutive lines of
    the bundled corpus, none within 20 lines of a benchmark passage (lines
    1000 + 2000 i), as "passage\npassage\n\n"; half are 8 consecutive
    non-blank lines of those sources, as "snippet\n\nsnippet\n\n\n".
The blocks are drawn with Python's random.Random(SEED) (default 1), so one
tree gives one corpus. Standard library only.
"""
import pathlib
import random
import sys


def main() -> int:
    if not 2 <= len(sys.argv) <= 4:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    out = pathlib.Path(sys.argv[1])
    try:
        pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 6000
        seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    except ValueError:
        print(f"copy_corpus.py: PAIRS and SEED must be integers, got {sys.argv[2:]}", file=sys.stderr)
        return 2
    if not out.parent.is_dir():
        print(f"copy_corpus.py: {out.parent} is not a directory (OUT={out})", file=sys.stderr)
        return 2
    if pairs < 0:
        print(f"copy_corpus.py: PAIRS={pairs}: allowed 0 or more", file=sys.stderr)
        return 2
    root = pathlib.Path(__file__).resolve().parent.parent  # the repository, wherever this runs from
    kjv_text = (root / "data/kjv/kjv.txt").read_text(encoding="utf-8")
    kjv = [line.strip() for line in kjv_text.splitlines() if line.strip()]
    bench_lines = [1000 + 2000 * i for i in range(16)]
    passage_starts = [i for i in range(len(kjv) - 3) if all(abs(i - b) > 20 for b in bench_lines)]
    sources = sorted(
        p for p in (root / "src").rglob("*")
        if p.suffix in (".cc", ".h") and root / "src/zaya/infer" not in p.parents)
    texts = [p.read_text(encoding="utf-8") for p in sources]
    code_lines = [[line.rstrip() for line in t.splitlines() if line.strip()] for t in texts]
    code_lines = [lines for lines in code_lines if len(lines) >= 8]
    rng = random.Random(seed)
    with open(out, "w", encoding="utf-8") as f:
        f.write(kjv_text.rstrip("\n") + "\n\n")
        for t in texts:
            f.write(t.rstrip("\n") + "\n\n")
        for k in range(pairs):
            if k % 2 == 0:
                i = rng.choice(passage_starts)
                passage = " ".join(kjv[i:i + 3])
                f.write(f"{passage}\n{passage}\n\n")
            else:
                lines = rng.choice(code_lines)
                i = rng.randrange(len(lines) - 7)
                snippet = "\n".join(lines[i:i + 8])
                f.write(f"{snippet}\n\n{snippet}\n\n\n")
    print(f"{out}: {out.stat().st_size} bytes: the bundled corpus, {len(sources)} sources, {pairs} doubled blocks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
