#!/usr/bin/env python3
"""The crates' module floors (DESIGN §1 "Layout"), checked by scripts/test.sh.

For each crate's `src/`, an edge A -> B joins two top-level modules when a file of A names
`crate::B` (a `use`, a path, an item of a `crate::{…}` group, or an intra-doc link: a doc
comment that links up the layers is a reference too). Unit-test code (`#[cfg(test)]` items,
`tests.rs` files) is left out: tests may reach anywhere.

Fails (exit 1) when
- any crate has an import cycle between its top-level modules (each circle is printed);
- a coordinator module other than `app`, `main` and `config` imports `crate::config`
  (modules take their settings from `settings.rs` and their own `…Args`);
- the coordinator has more than MAX_UPWARD imports pointing up its layers (LAYERS below,
  lowest first; an import of a module in a higher layer is upward). Each is printed.

Usage: layering.py REPO_ROOT
"""
import os
import re
import sys

CRATES = ["coordinator", "crawler-node", "profiles", "proto", "cli", "telemetry", "test-kit", "bench"]

# The coordinator's layers, lowest first: a module may import its own layer and those
# below. `app`, `main` and `lib` compose everything and are not checked.
LAYERS = [
    ["settings", "db", "error"],
    ["metrics", "auth", "tls", "node_session", "queue", "ledger", "profiles"],
    ["control", "fleet", "search", "delivery", "retention", "reaper"],
    ["ops", "schedule", "alerts", "dispatch"],
    ["grpc", "readiness"],
    ["config"],
]
MAX_UPWARD = 4
CONFIG_IMPORTERS = {"app", "main", "config", "lib"}


def strip_test_items(text):
    """Drops every `#[cfg(test)]` item: the attribute and the braced block (or the line)
    that follows it."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]", text)
        if not m:
            return text
        start = m.start()
        rest = m.end()
        brace = text.find("{", rest)
        semi = text.find(";", rest)
        if brace < 0 or (0 <= semi < brace):
            end = semi + 1 if semi >= 0 else len(text)
        else:
            depth = 0
            end = len(text)
            for i in range(brace, len(text)):
                if text[i] == "{":
                    depth += 1
                elif text[i] == "}":
                    depth -= 1
                    if depth == 0:
                        end = i + 1
                        break
        text = text[:start] + text[end:]


def group_items(group):
    """Top-level items of a `crate::{…}` group: `a`, `b::c`, `d::{e, f}` → a, b, d."""
    depth, current, parts = 0, "", []
    for ch in group:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    names = []
    for part in parts:
        m = re.match(r"\s*([a-z_][a-z0-9_]*)", part)
        if m and m.group(1) != "self":
            names.append(m.group(1))
    return names


def crate_groups(text):
    """The contents of each `crate::{…}` group, braces balanced."""
    for m in re.finditer(r"\bcrate::\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
            i += 1
        yield text[m.end():i - 1]


def module_edges(src):
    """{module: {imported module: [file, …]}} for one crate's src dir."""
    modules, edges = set(), {}
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)
            first = rel.split(os.sep)[0]
            module = first[:-3] if first.endswith(".rs") else first
            modules.add(module)
            if name == "tests.rs" or f"{os.sep}tests{os.sep}" in f"{os.sep}{rel}":
                continue
            with open(path, encoding="utf-8") as f:
                text = strip_test_items(f.read())
            names = re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", text)
            for group in crate_groups(text):
                names += group_items(group)
            for target in names:
                if target != module:
                    edges.setdefault(module, {}).setdefault(target, []).append(rel)
    return modules, edges


def cycles(modules, edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in modules:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(modules):
        if v not in index:
            visit(v)
    return out


def main(root):
    failed = False
    for crate in CRATES:
        src = os.path.join(root, crate, "src")
        modules, edges = module_edges(src)
        for component in cycles(modules, edges):
            failed = True
            print(f"{crate}: import cycle between modules {' '.join(component)}")
            for a in component:
                for b in component:
                    if b in edges.get(a, {}):
                        print(f"  {a} -> {b} ({', '.join(sorted(set(edges[a][b])))})")
    modules, edges = module_edges(os.path.join(root, "coordinator", "src"))
    for module, targets in sorted(edges.items()):
        if "config" in targets and module not in CONFIG_IMPORTERS:
            failed = True
            files = ", ".join(sorted(set(targets["config"])))
            print(f"coordinator: {module} imports crate::config ({files}); use crate::settings")
    layer = {m: i for i, names in enumerate(LAYERS) for m in names}
    unplaced = sorted(m for m in modules if m not in layer and m not in CONFIG_IMPORTERS)
    if unplaced:
        failed = True
        print(f"coordinator: modules in no layer of scripts/lib/layering.py: {' '.join(unplaced)}")
    upward = [
        (a, b, files)
        for a, targets in sorted(edges.items())
        for b, files in sorted(targets.items())
        if a in layer and b in layer and layer[b] > layer[a]
    ]
    print(f"coordinator: {len(upward)} upward imports (at most {MAX_UPWARD})")
    for a, b, files in upward:
        print(f"  {a} -> {b} ({', '.join(sorted(set(files)))})")
    if len(upward) > MAX_UPWARD:
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
