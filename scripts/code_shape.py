#!/usr/bin/env python3
"""The shape of the Rust code: the longest functions and the largest modules.

`scripts/code_shape.py [FOLDER] [--top N]` prints the N longest functions (lines from
`fn` to its closing brace, tests included) and the N largest files under FOLDER
(default: crates/concord/src).
"""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from module_graph import strip

ROOT = Path(__file__).resolve().parent.parent


def functions(path: Path):
    code = strip(path.read_text())
    for m in re.finditer(r"\bfn\s+(\w+)", code):
        brace = code.find("{", m.end())
        semi = code.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):
            continue
        depth, j = 0, brace
        while j < len(code):
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            if depth == 0:
                break
            j += 1
        start = code.count("\n", 0, m.start()) + 1
        yield m.group(1), start, code.count("\n", m.start(), j) + 1


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 10
    folder = ROOT / (
        args[0] if args and not args[0].isdigit() else "crates/concord/src"
    )
    files = sorted(folder.rglob("*.rs"))
    fns = [(n, f, s, lines) for f in files for (n, s, lines) in functions(f)]
    fns.sort(key=lambda x: -x[3])
    print(f"longest functions under {folder.relative_to(ROOT)}:")
    for n, f, s, lines in fns[:top]:
        print(f"  {lines:4d}  {f.relative_to(folder)}:{s} {n}")
    sizes = sorted(((len(f.read_text().splitlines()), f) for f in files), reverse=True)
    print("largest modules:")
    for lines, f in sizes[:top]:
        print(f"  {lines:4d}  {f.relative_to(folder)}")


if __name__ == "__main__":
    main()
