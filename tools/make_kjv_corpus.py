#!/usr/bin/env python3
"""Builds data/kjv/kjv.txt, the corpus bundled with zaya.cpp, from Debian's
bible-kjv package (`apt-get install bible-kjv`; the King James Version text is
public domain, see data/kjv/README.md).

Output format (what `zaya data shards` reads): plain UTF-8 text, one document
per chapter, documents separated by one blank line. A document is the chapter
title ("Genesis 1") followed by one verse per line, verse numbers removed.

Run from the repository root:  python3 tools/make_kjv_corpus.py
"""
import re
import subprocess
import sys

raw = subprocess.run(["bible", "-m", "8192", "Gen1:1-Rev22:21"], check=True, capture_output=True,
                     text=True).stdout
docs = []
title, verses = None, []
for line in raw.split("\n"):
    if not line.strip():
        continue
    m = re.match(r"^(\S.*\s\d+)$", line)  # chapter heading, e.g. "Genesis 1", "1 Kings 3"
    if m and not line.startswith(" "):
        if title is not None:
            docs.append(title + "\n" + "\n".join(verses))
        title, verses = m.group(1), []
        continue
    m = re.match(r"^\s+\d+\s+(.*)$", line)  # new verse
    if m:
        verses.append(m.group(1).strip())
    else:  # wrapped continuation of the previous verse
        verses[-1] += " " + line.strip()
if title is not None:
    docs.append(title + "\n" + "\n".join(verses))
with open("data/kjv/kjv.txt", "w", encoding="utf-8") as f:
    f.write("\n\n".join(docs) + "\n")
print(f"wrote data/kjv/kjv.txt: {len(docs)} documents", file=sys.stderr)
