#!/usr/bin/env python3
"""scripts/chart-docs.py — owns: the values tables of the charts' README.md files.

Reads each chart's values.yaml, where every documented value is preceded by a `# -- text`
comment (continued on following `#` lines), and writes a Markdown table of key, default and
description between the `<!-- values:begin -->` and `<!-- values:end -->` markers of the chart's
README.md. With --check it writes nothing and fails when a README is stale (CI runs this).
Needs only the Python standard library (no helm-docs, no PyYAML): values.yaml files stick to
block maps, scalars and flow lists/maps on one line.
"""

import pathlib
import re
import sys

BEGIN, END = "<!-- values:begin -->", "<!-- values:end -->"
KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):(?: (?P<value>.*))?$")


def parse(lines):
    """Yields (path, description, default) for every documented key, in file order."""
    stack = []  # (indent, key)
    pending = None  # description lines waiting for their key
    rows = []
    i = 0
    while i < len(lines):
        line = lines[i].rstrip("\n")
        stripped = line.strip()
        if stripped.startswith("# --"):
            pending = [stripped[4:].strip()]
        elif stripped.startswith("#") and pending is not None and not stripped.startswith("# --"):
            pending.append(stripped[1:].strip())
        elif m := KEY.match(line):
            indent, key, value = len(m["indent"]), m["key"], (m["value"] or "").strip()
            while stack and stack[-1][0] >= indent:
                stack.pop()
            path = ".".join([k for _, k in stack] + [key])
            if pending is not None:
                if value:
                    default = value
                else:
                    block = []
                    j = i + 1
                    while j < len(lines) and (
                        not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent
                    ):
                        if lines[j].strip() and not lines[j].strip().startswith("#"):
                            block.append(lines[j].rstrip("\n"))
                        j += 1
                    default = flow(block)
                rows.append((path, " ".join(pending).strip(), default))
                pending = None
            stack.append((indent, key))
        elif stripped and not stripped.startswith("#"):
            pending = None
        i += 1
    return rows


def flow(block):
    """A block of YAML (maps and `- scalar` lists) on one line, in flow style."""
    if not block:
        return "{}"
    base = len(block[0]) - len(block[0].lstrip())

    def at(start, indent):
        items, i, is_list = [], start, block[start].strip().startswith("- ")
        while i < len(block):
            cur = len(block[i]) - len(block[i].lstrip())
            if cur < indent:
                break
            text = block[i].strip()
            if is_list:
                items.append(text[2:])
                i += 1
                continue
            key, _, value = text.partition(":")
            value = value.strip()
            if value:
                items.append(f"{key}: {value}")
                i += 1
            else:
                inner_indent = len(block[i + 1]) - len(block[i + 1].lstrip())
                inner, i = at(i + 1, inner_indent)
                items.append(f"{key}: {inner}")
        text = ", ".join(items)
        return (f"[{text}]" if is_list else f"{{{text}}}"), i

    return at(0, base)[0]


def table(rows):
    out = ["| Key | Default | Description |", "|---|---|---|"]
    for path, description, default in rows:
        default, description = default.replace("|", "\\|"), description.replace("|", "\\|")
        out.append(f"| `{path}` | `{default}` | {description} |")
    return "\n".join(out)


def main():
    check = "--check" in sys.argv[1:]
    root = pathlib.Path(__file__).resolve().parent.parent / "charts"
    stale = []
    for values in sorted(root.glob("*/values.yaml")):
        readme = values.parent / "README.md"
        rows = parse(values.read_text().splitlines(keepends=True))
        if not rows or not readme.exists():
            continue
        text = readme.read_text()
        if BEGIN not in text or END not in text:
            continue
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        new = f"{head}{BEGIN}\n{table(rows)}\n{END}{tail}"
        if new != text:
            stale.append(str(readme.relative_to(root.parent)))
            if not check:
                readme.write_text(new)
    if check and stale:
        print("stale values tables (run scripts/chart-docs.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    for name in stale:
        print(f"updated {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
