#!/usr/bin/env python3
"""Checks that the folders of host/ depend on each other only as their main headers say.

Every folder of host/ has one header whose opening comment holds a line

    // Depends on: support/, config/.

(continued on following comment lines until a line ending in '.'); "nothing else in host/."
declares no dependency. Every #include "FOLDER/..." of a file in a folder must name the folder
itself or one it declares; the declared graph must have no cycle; only main.cc and cli/ may
include cli/. Prints every violation with file and line and exits 1 if there is any.

Usage: check_layering.py HOST_DIR
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"')
DECLARED = re.compile(r'^// Depends on: (.*)$')


def declared_dependencies(folder_path):
    """(header, set of folders) for each header of the folder that declares its dependencies."""
    found = []
    for name in sorted(os.listdir(folder_path)):
        if not name.endswith('.h'):
            continue
        path = os.path.join(folder_path, name)
        with open(path, encoding='utf-8') as f:
            lines = f.read().split('\n')
        for i, line in enumerate(lines):
            if not line.startswith('//'):
                break  # only the opening comment counts
            m = DECLARED.match(line)
            if not m:
                continue
            text = m.group(1)
            j = i
            while not text.rstrip().endswith('.') and j + 1 < len(lines) and \
                    lines[j + 1].startswith('//'):
                j += 1
                text += ' ' + lines[j][2:].strip()
            first_sentence = text.split('.')[0]
            deps = set() if first_sentence.startswith('nothing') else \
                set(re.findall(r'([a-z_]+)/', first_sentence))
            found.append((name, deps))
            break
    return found


def find_cycle(graph):
    state = {}

    def visit(node, path):
        state[node] = 'open'
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 'open':
                loop = path + [node]
                return loop[loop.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt, path + [node])
                if cycle:
                    return cycle
        state[node] = 'done'
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node, [])
            if cycle:
                return cycle
    return None


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().split('\n')[-1], file=sys.stderr)
        return 2
    root = sys.argv[1]
    # A folder without sources (an empty directory an old checkout left behind) is no folder.
    folders = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and
                     any(n.endswith(('.h', '.cc')) for n in os.listdir(os.path.join(root, d))))
    errors = []
    graph = {}
    for folder in folders:
        decls = declared_dependencies(os.path.join(root, folder))
        if len(decls) != 1:
            where = ', '.join(h for h, _ in decls) or 'none of its headers'
            errors.append(f'{folder}/: expected one header declaring "// Depends on:", found '
                          f'{len(decls)} ({where})')
            continue
        header, deps = decls[0]
        unknown = sorted(deps - set(folders))
        if unknown:
            errors.append(f'{folder}/{header}: declares folders that do not exist: '
                          + ', '.join(unknown))
        graph[folder] = deps - {folder}
    cycle = find_cycle(graph)
    if cycle:
        errors.append('the declared dependencies have a cycle: ' + ' -> '.join(cycle))

    def check_file(rel, allowed, folder):
        with open(os.path.join(root, rel), encoding='utf-8') as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m or m.group(1) not in folders:
                    continue  # a system or plugin-ABI header ("fleet/...")
                target = m.group(1)
                if target == 'cli' and folder not in ('cli', None):
                    errors.append(f'{rel}:{n}: includes "{m.group(0).split(chr(34))[1]}": only '
                                  'cli/ and main.cc may include cli/')
                elif target != folder and target not in allowed:
                    errors.append(f'{rel}:{n}: includes "{line.split(chr(34))[1]}", but '
                                  f'{folder}/ does not declare {target}/ among its dependencies')

    for folder in folders:
        for name in sorted(os.listdir(os.path.join(root, folder))):
            if name.endswith(('.h', '.cc')):
                check_file(os.path.join(folder, name), graph.get(folder, set()), folder)
    for name in sorted(os.listdir(root)):
        if name.endswith(('.h', '.cc')):
            check_file(name, {'cli', 'support'}, None)

    for e in errors:
        print(e)
    if errors:
        return 1
    print(f'{len(folders)} folders of {root}: every include follows the declared dependencies')
    return 0


if __name__ == '__main__':
    sys.exit(main())
