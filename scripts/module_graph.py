#!/usr/bin/env python3
"""The library's module graph: which module of crates/concord/src uses which.

A module is a file (`txn/commit.rs`; a folder's `mod.rs` is the folder). An edge A -> B
is a path in A's code (a `use`, or a path written inline) that names an item of B:
`crate::...`, `super::...`, `self::...`, or a child module by its name. Not counted: the
code of `#[cfg(test)]` modules (tests may reach the whole crate), comments and strings,
and edges between a module and its own ancestors or descendants (a folder and its files
are one unit: its `mod.rs` declares and re-exports them, they use its items).

Checked (exit 1 otherwise):
- layers: a top-level module uses only those of lower layers (`LAYERS`, bottom first);
- circles: no strongly connected component of more than one module, among the files,
  nor among the children of any folder (a folder's edges being its files' edges).

`--print` lists every edge; `--dot` writes the graph in Graphviz's format.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "crates" / "concord" / "src"

# Bottom first: a module may use the ones in its own layer's row and the rows before it
# (in its own row only without circles, which the second check finds).
LAYERS = [
    ["duration", "env"],
    ["format"],
    ["error"],
    ["decode", "encode"],
    ["storage"],
    ["io"],
    ["txn"],
    ["iceberg"],
    ["table"],
    ["sql"],
    ["lib"],
]


def module_of(path: Path) -> tuple:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts == ["lib"]:
        return ()
    return tuple(parts)


def strip(text: str) -> str:
    """The code without comments, string and char literals."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif (
            c == "r"
            and re.match(r'r#*"', text[i:])
            and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))
        ):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            i = n if end < 0 else end + 1 + len(hashes)
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:]):
            i += len(re.match(r"'(\\.[^']*|[^\\'])'", text[i:]).group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def drop_test_modules(code: str) -> str:
    """`code` without the `#[cfg(test)]` items (modules and functions)."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]", code)
        if not m:
            return code
        brace = code.find("{", m.end())
        semi = code.find(";", m.end())
        if semi >= 0 and (brace < 0 or semi < brace):
            code = code[: m.start()] + code[semi + 1 :]
            continue
        depth, j = 0, brace
        while j < len(code):
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        code = code[: m.start()] + code[j + 1 :]


def expand_use(tree: str) -> list:
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+", "", tree)
    tree = re.sub(r"\bas\w+", "", tree.replace("as", " as ")).replace(" ", "")

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += ch == "{"
            depth -= ch == "}"
            cur += ch
        if cur:
            parts.append(cur)
        return parts

    def go(s):
        i = s.find("{")
        if i < 0:
            return [s]
        prefix, inner = s[:i], s[i + 1 : s.rfind("}")]
        out = []
        for part in split_top(inner):
            out += [prefix + p for p in go(part)]
        return out

    return go(tree)


def resolve(segments: list, here: tuple, modules: set, children: dict):
    """The module a path names, or None (an outside crate, or std)."""
    if not segments:
        return None
    head, rest = segments[0], segments[1:]
    if head == "crate":
        base = ()
    elif head == "super":
        base = here[:-1]
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    elif head == "self":
        base = here
    elif head in children.get(here, ()):
        base, rest = here, segments
    else:
        return None
    found = base
    for seg in rest:
        if found + (seg,) in modules:
            found = found + (seg,)
        else:
            break
    return found


def graph():
    files = sorted(ROOT.rglob("*.rs"))
    modules = {module_of(f): f for f in files}
    children = {}
    for m in modules:
        if m:
            children.setdefault(m[:-1], set()).add(m[-1])
    edges = {}
    for m, f in modules.items():
        code = drop_test_modules(strip(f.read_text()))
        paths = []
        for use in re.finditer(r"\buse\s+([^;]+);", code):
            paths += expand_use(use.group(1))
        code_wo_use = re.sub(r"\buse\s+[^;]+;", "", code)
        paths += re.findall(r"\b(?:crate|super|self)(?:::\w+)+", code_wo_use)
        for child in children.get(m, ()):
            paths += re.findall(r"(?<![:\w])" + child + r"(?:::\w+)+", code_wo_use)
        for p in paths:
            target = resolve(p.split("::"), m, set(modules), children)
            if target is None or target == m:
                continue
            if target and m and (target[: len(m)] == m or m[: len(target)] == target):
                continue  # a module and its ancestors / descendants are one unit
            edges.setdefault(m, set()).add(target)
    return modules, edges


def name(m: tuple) -> str:
    return "/".join(m) if m else "lib"


def layer(m: tuple) -> int:
    top = m[0] if m else "lib"
    for i, row in enumerate(LAYERS):
        if top in row:
            return i
    raise SystemExit(f"module_graph: top-level module {top!r} is in no layer (LAYERS)")


def circles(nodes, edges):
    """Tarjan: the strongly connected components of more than one node."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def folder_circles(modules, edges):
    """The circles among the children (files or folders) of each folder."""
    out = []
    folders = {m[:i] for m in modules for i in range(len(m))}
    for folder in sorted(folders):
        depth = len(folder)
        unit = {
            m: m[: depth + 1] for m in modules if len(m) > depth and m[:depth] == folder
        }
        collapsed = {}
        for m, targets in edges.items():
            for t in targets:
                a, b = unit.get(m), unit.get(t)
                if a and b and a != b:
                    collapsed.setdefault(a, set()).add(b)
        out += [c for c in circles(set(unit.values()), collapsed) if c not in out]
    return out


def main():
    modules, edges = graph()
    if "--print" in sys.argv:
        for m in sorted(edges):
            print(f"{name(m)} -> {', '.join(sorted(name(t) for t in edges[m]))}")
    if "--dot" in sys.argv:
        print("digraph concord {")
        for m in sorted(edges):
            for t in sorted(edges[m]):
                print(f'  "{name(m)}" -> "{name(t)}";')
        print("}")
    up = [(m, t) for m in edges for t in edges[m] if layer(t) > layer(m)]
    comps = circles(modules, edges) + folder_circles(modules, edges)
    for m, t in sorted(up):
        print(
            f"module_graph: {name(m)} uses {name(t)}, a higher layer", file=sys.stderr
        )
    for comp in comps:
        print(
            f"module_graph: circle of {len(comp)}: {', '.join(name(c) for c in comp)}",
            file=sys.stderr,
        )
    n_edges = sum(len(t) for t in edges.values())
    print(
        f"module_graph: {len(modules)} modules, {n_edges} edges, {len(up)} going up, {len(comps)} circles",
        file=sys.stderr,
    )
    sys.exit(1 if up or comps else 0)


if __name__ == "__main__":
    main()
