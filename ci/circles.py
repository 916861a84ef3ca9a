#!/usr/bin/env python3
"""Fails if the modules of a crate import each other in a circle.

A module's imports are the `crate::…` and `super::…` paths in its file
(names re-exported from lib.rs count as their module's), outside
`#[cfg(test)]` modules and comments. Usage: ci/circles.py SRC_DIR...
"""
import os
import re
import sys

TEST_MODULE = re.compile(r"#\[cfg\((test|all\(test[^\]]*)\)\]\s*(pub(\(\w+\))? )?mod \w+")
CRATE_PATH = re.compile(r"crate::((?:\w+::)*\w+)")
CRATE_GROUP = re.compile(r"crate::\{([^;]*)\}", re.S)
GROUP_ITEM = re.compile(r"(\w+)(?:::|\s*[,}]|\s*$)")
SUPER_PATH = re.compile(r"super::((?:\w+::)*\w+)")
REEXPORT = re.compile(r"pub use (\w+)::(\{[^;]*\}|\w+);")


def modules(src):
    """Module path (`a::b`) -> file, for every file below `src` but lib.rs."""
    found = {}
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            parts = os.path.relpath(path, src)[: -len(".rs")].split(os.sep)
            if parts[-1] == "mod":
                parts = parts[:-1]
            if parts != ["lib"]:
                found["::".join(parts)] = path
    return found


def reexports(src, mods):
    """Name re-exported by lib.rs -> the module it comes from."""
    text = open(os.path.join(src, "lib.rs")).read()
    names = {}
    for m in REEXPORT.finditer(text):
        if m.group(1) in mods:
            for name in re.findall(r"\w+", m.group(2)):
                names[name] = m.group(1)
    return names


def longest_module(path, mods):
    """The longest prefix of `path` (a list of names) that is a module."""
    for n in range(len(path), -1, -1):
        candidate = "::".join(path[:n])
        if candidate in mods:
            return candidate
    return None


def imports(src):
    """Module -> the modules it imports."""
    mods = modules(src)
    names = reexports(src, mods)
    graph = {mod: set() for mod in mods}
    for mod, path in mods.items():
        text = open(path).read()
        test = TEST_MODULE.search(text)
        if test:
            text = text[: test.start()]
        text = re.sub(r"//.*", "", text)
        found = set()
        for m in CRATE_PATH.finditer(text):
            path_names = m.group(1).split("::")
            if path_names[0] in names:
                found.add(names[path_names[0]])
            else:
                found.add(longest_module(path_names, mods))
        for m in CRATE_GROUP.finditer(text):
            for item in GROUP_ITEM.findall(m.group(1)):
                found.add(item if item in mods else names.get(item))
        parent = mod.split("::")[:-1]
        for m in SUPER_PATH.finditer(text):
            found.add(longest_module(parent + m.group(1).split("::"), mods))
        graph[mod] = {other for other in found if other and other != mod}
    return graph


def circles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, result = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return result


def main():
    bad = 0
    for src in sys.argv[1:]:
        graph = imports(src)
        for component in circles(graph):
            bad += 1
            print(f"{src}: modules importing each other in a circle: {', '.join(component)}")
            for mod in component:
                print(f"    {mod} -> {', '.join(sorted(x for x in graph[mod] if x in component))}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
