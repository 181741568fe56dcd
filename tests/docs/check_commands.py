"""Every file that a command in README.md or docs/**/*.md hands to gossamer exists in the
repository, and no page holds a merge's conflict markers (a README once shipped both sides of one).

A command line in a fenced code block names its inputs with --topology, --config, --cluster,
--model (and the files topo/sim read as positional arguments). Each must be a shipped file
(relative to the repository root), a file the same page writes first (`> name.json`, `--out`,
`--save`), or an obvious placeholder in angle brackets. Prints one line per missing file.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
FLAGS = ("--topology", "--config", "--cluster", "--model", "--checkpoint")
WRITES = re.compile(r">\s*([\w./-]+\.json)|--(?:out|save|json)\s+([\w./-]+)")


def blocks(text):
    fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if fence:
            yield line


def check(page):
    missing = []
    written = set()
    lines = list(blocks(page.read_text()))
    # a backslash continues a command on the next line
    joined, cur = [], ""
    for line in lines:
        cur += line.rstrip("\\") + " "
        if not line.rstrip().endswith("\\"):
            joined.append(cur)
            cur = ""
    for cmd in joined:
        for m in WRITES.finditer(cmd):
            written.add(m.group(1) or m.group(2))
        words = cmd.split()
        for i, w in enumerate(words[:-1]):
            if w not in FLAGS:
                continue
            name = words[i + 1].strip("'\"")
            if name.startswith("<") or "$" in name or "*" in name or name.startswith("-"):
                continue
            if name in written or any(name.startswith(d.rstrip("/") + "/") for d in written):
                continue
            if not (ROOT / name).exists():
                missing.append(f"{page.relative_to(ROOT)}: `{w} {name}`: no such file in the "
                               f"repository; ship it under examples/ or name a shipped file")
    return missing


MARKER = re.compile(r"^(<<<<<<< |=======$|>>>>>>> )")


def conflicts(page):
    return [f"{page.relative_to(ROOT)}:{k}: a merge conflict marker ('{line[:7]}'); resolve the "
            f"merge: keep one text" for k, line in enumerate(page.read_text().splitlines(), 1)
            if MARKER.match(line)]


pages = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
problems = [p for page in pages for p in check(page) + conflicts(page)]
for p in problems:
    print(p)
print(f"checked {len(pages)} pages: {len(problems)} problems")
sys.exit(1 if problems else 0)
