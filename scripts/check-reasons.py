#!/usr/bin/env python3
"""scripts/check-reasons.py — owns: the check that every condition reason the code writes is documented in docs/reference/conditions.md.

It reads the Rust sources of central, the agent and the crates they write reasons from
(central/src, agent/src, core/src, api/src, and kadmin/src, whose `Error::reason` becomes the
reason of a KafkaTopic that Kafka failed) and extracts every `reason` a status condition can
get, from these patterns only (comments, `#[cfg(test)]` items and the files tests.rs,
fixtures.rs and testing.rs left out):

  reason-fn     the string literals and `&str` constants in the body of `fn reason(..)` or
                `fn <something>_reason(..)` returning `&'static str` (match arms `=> "Xxx"`,
                `=> crate::probes::REASON`), unless its `impl` is listed in NOT_CONDITIONS;
  as-str        the same in `fn as_str(..)` of a type named `Reason` or `Cause` (the typed
                warning and refusal causes: `kafka::warning::Reason`, `refuse::Cause`, ...);
  call          a string literal or `&str` constant given whole as an argument to a call that
                sets a reason: `not_ready(..)`, `Refusal::new(..)`, `refusal(..)`,
                `refused(..)`, `refuse(..)`, `.with_reason(..)`, `Condition::warning(..)`,
                `set_warning(..)`, `fail(..)`, and the recovery's `wait(..)` and `say(..)`;
  struct        `reason: <literal or constant>` in a `Refusal { .. }` or `PodFailure { .. }`;
  reason-mod    every `&str` constant of a `mod reason { .. }` (the podset's pod failures).

Only single CamelCase words count (`Deploying`, `InvalidProbe`): the link's protocol reasons
(`unknown-message`) and the sentences of a roll's reason are not condition reasons. A `&str`
constant is resolved by its path (`jmx_exporter::REASON`, `kstretch_api::condition::
KUBERNETES_ERROR`, a bare name in its own file).

The reference lists a reason as the first cell of a table row, in backticks:
`| `InvalidProbe` | Ready=False | ... |`. By default the check fails (exit 1) naming every
reason the code writes that the reference lacks and every reason the reference documents that
the code no longer writes; else it prints one line with the count.

Usage: scripts/check-reasons.py [--list [--where]] [--doc PATH]
  --list    print the reasons the code writes, sorted, one a line (--where: with the places)
  --doc     the reference to check (default docs/reference/conditions.md)
"""

import argparse
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = ["central/src", "agent/src", "core/src", "api/src", "kadmin/src"]
SKIPPED_FILES = {"tests.rs", "fixtures.rs", "testing.rs"}
DOC = "docs/reference/conditions.md"

# The `reason()`s whose strings never reach a condition, by (file, type of the impl), with why.
# Each must still match a `fn reason` (a stale entry fails the check), so a new reason function
# is counted unless someone says here why it is not a condition's.
NOT_CONDITIONS = {
    ("central/src/error.rs", "Error"):
        "a Kafka or KafkaConnect pass that fails with it is retried; only metrics and logs "
        "get the reason (owned.rs error_policy)",
    ("central/src/connector/reconcile.rs", "Error"):
        "a KafkaConnector pass that fails with it is retried; only metrics and logs get it",
    ("agent/src/podset/error.rs", "Error"):
        "metric label and log field; the podset's Error condition takes its pods' failure "
        "reasons (plan::reason)",
    ("central/src/link/calls.rs", "CallError"):
        "a failed call to an agent is said in a condition's message, not its reason",
    ("core/src/topics/policy.rs", "PolicyError"):
        "an illegal topic namespace policy file stops central at start-up",
    ("central/src/kafka/reconcile/pools.rs", "Scaled"):
        "the reasons of the Events of a pool that gains or loses nodes",
}

CAMEL = re.compile(r"^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)*$")
CONST_PATH = re.compile(r"^(?:(?:[a-z_][a-z0-9_]*|[A-Z]\w*)::)*([A-Z][A-Z0-9_]*)$")
CRATE_NAMES = {"crate", "self", "super"}

REASON_FN = re.compile(r"\bfn\s+(reason|\w+_reason)\s*\([^)]*\)\s*->\s*&'static\s+str\s*\{")
AS_STR_FN = re.compile(r"\bfn\s+as_str\s*\([^)]*\)\s*->\s*&'static\s+str\s*\{")
CALL = re.compile(
    r"(?<![\w])(Refusal::new|Condition::warning|not_ready|refusal|refused|refuse"
    r"|with_reason|set_warning|fail|wait|say)\s*\("
)
STRUCT = re.compile(r"\b(Refusal|PodFailure)\s*\{")
IMPL = re.compile(r"\bimpl\b(?:\s*<[^{;]*?>)?\s+([^{;]*?)\s*\{")
CONST = re.compile(
    r"\bconst\s+([A-Z][A-Z0-9_]*)\s*:\s*&(?:'static\s+)?str\s*=\s*([^;]+);"
)
MOD_BLOCK = re.compile(r"\bmod\s+(\w+)\s*\{")
CFG_TEST = re.compile(r"#\[cfg\(test\)\]")


def scan(src):
    """`src` with comments blanked (newlines kept, so offsets and lines stay) and the spans of
    its string literals: a list of (start, end, value), read as Rust's lexer reads them (raw
    strings, escapes, byte strings, characters that look like lifetimes)."""
    out = list(src)
    strings = []
    i, n = 0, len(src)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif (c == "r" or src.startswith("br", i)) and re.match(r"b?r#*\"", src[i:i + 260]) \
                and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r"b?r(#*)\"", src[i:])
            hashes = m.group(1)
            start = i + m.end()
            end = src.find('"' + hashes, start)
            end = n if end < 0 else end
            strings.append((i, end + 1 + len(hashes), src[start:end]))
            i = end + 1 + len(hashes)
        elif c == '"' or (c == "b" and src.startswith('b"', i)
                          and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_"))):
            start = i + (2 if c == "b" else 1)
            j, value = start, []
            while j < n and src[j] != '"':
                if src[j] == "\\":
                    value.append(src[j:j + 2])
                    j += 2
                else:
                    value.append(src[j])
                    j += 1
            strings.append((i, j + 1, "".join(value)))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'])'", src[i:])
            i += m.end() if m else 1
        else:
            i += 1
    return "".join(out), strings


class Source:
    """One file: its code without comments and test items, its string literals, and where
    its modules and impls are."""

    def __init__(self, path):
        self.path = path
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            text = f.read()
        code, strings = scan(text)
        self.strings = {s: (e, v) for s, e, v in strings}
        self.code = code
        for a, b in self.test_items():
            self.code = self.code[:a] + re.sub(r"[^\n]", " ", self.code[a:b]) + self.code[b:]
            self.strings = {s: ev for s, ev in self.strings.items() if not a <= s < b}
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", self.code)]

    def line(self, offset):
        lo, hi = 0, len(self.line_starts)
        while lo + 1 < hi:
            mid = (lo + hi) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid
        return lo + 1

    def skip_string(self, i):
        """The offset after the string literal starting at `i`, or `i` itself."""
        s = self.strings.get(i)
        return s[0] if s else i

    def close(self, i, opening="{", closing="}"):
        """The offset after the bracket that closes the one at `i`."""
        depth, n = 0, len(self.code)
        while i < n:
            if i in self.strings:
                i = self.strings[i][0]
                continue
            c = self.code[i]
            if c == opening:
                depth += 1
            elif c == closing:
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return n

    def test_items(self):
        """The spans of the items under `#[cfg(test)]` (a `mod tests { .. }`, a test-only
        function or `mod x;`)."""
        spans = []
        for m in CFG_TEST.finditer(self.code):
            if m.start() in self.strings or any(a <= m.start() < b for a, b in spans):
                continue
            i = m.end()
            n = len(self.code)
            while i < n:
                if i in self.strings:
                    i = self.strings[i][0]
                    continue
                c = self.code[i]
                if c == ";":
                    spans.append((m.start(), i + 1))
                    break
                if c == "{":
                    spans.append((m.start(), self.close(i)))
                    break
                if c == "#" and self.code.startswith("#[", i):
                    i = self.close(i + 1, "[", "]")
                    continue
                i += 1
        return spans

    def blocks(self, pattern):
        """(match, body start, body end) of every `pattern` ending with an opening brace."""
        for m in pattern.finditer(self.code):
            yield m, m.end() - 1, self.close(m.end() - 1)

    def literal(self, a, b):
        """The value of the string literal that is the whole of code[a:b], if it is one."""
        text = self.code[a:b]
        lead = len(text) - len(text.lstrip())
        start = a + lead
        s = self.strings.get(start)
        if not s:
            return None
        end, value = s
        rest = self.code[end:b].strip()
        if rest in ("", ".to_owned()", ".to_string()", ".into()"):
            return value
        return None

    def top_level(self, start, end):
        """The positions in code[start:end] outside strings and nested brackets."""
        depth, i = 0, start
        while i < end:
            if i in self.strings:
                i = self.strings[i][0]
                continue
            c = self.code[i]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            elif depth == 0:
                yield i
            i += 1

    def split(self, start, end):
        """The comma-separated top-level parts of code[start:end], as (start, end) pairs."""
        out, part = [], start
        for i in self.top_level(start, end):
            if self.code[i] == ",":
                out.append((part, i))
                part = i + 1
        if self.code[part:end].strip():
            out.append((part, end))
        return out

    def args(self, open_paren):
        """The top-level arguments (start, end) of the call whose `(` is at `open_paren`."""
        return self.split(open_paren + 1, self.close(open_paren, "(", ")") - 1)


def module_path(path):
    """The module segments of a file (`central/src/kafka/answer.rs` -> [kafka, answer])."""
    parts = path.split("/")
    rel = parts[parts.index("src") + 1:]
    rel[-1] = rel[-1][:-3]
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return rel


class Constants:
    """Every `&str` constant: by name, with its module path and value (a literal or a path)."""

    def __init__(self, sources):
        self.by_name = defaultdict(list)
        self.reason_mods = []
        for src in sources:
            inline = [(m.group(1), a, b) for m, a, b in src.blocks(MOD_BLOCK)]
            for m in CONST.finditer(src.code):
                mods = [name for name, a, b in inline if a < m.start() < b]
                value = src.literal(m.start(2), m.end(2))
                raw = value if value is not None else src.code[m.start(2):m.end(2)].strip()
                entry = {
                    "src": src,
                    "module": module_path(src.path) + mods,
                    "name": m.group(1),
                    "literal": value is not None,
                    "raw": raw,
                    "offset": m.start(),
                }
                self.by_name[m.group(1)].append(entry)
                if mods and mods[-1] == "reason":
                    self.reason_mods.append(entry)

    def resolve(self, path, src, seen=()):
        """The value of the constant at `path` as written in `src`, or None."""
        path = re.sub(r"\s+", "", path)
        m = CONST_PATH.match(path)
        if not m:
            return None
        segments = path.split("::")
        name = segments[-1]
        qualifiers = [s for s in segments[:-1] if s not in CRATE_NAMES]
        qualifiers = [s for s in qualifiers if not s.startswith("kstretch_")]
        candidates = self.by_name.get(name, [])
        if qualifiers:
            candidates = [c for c in candidates
                          if c["module"][-len(qualifiers):] == qualifiers]
        else:
            own = [c for c in candidates if c["src"] is src]
            candidates = own or candidates
        if len(candidates) != 1 or path in seen:
            return None
        c = candidates[0]
        if c["literal"]:
            return c["raw"]
        return self.resolve(c["raw"], c["src"], seen + (path,))


def impls(src):
    """(start, end, type) of every impl block; the type is the one after `for`, if any."""
    out = []
    for m, a, b in src.blocks(IMPL):
        head = m.group(1)
        target = head.split(" for ")[-1].strip()
        trait = head.split(" for ")[0].strip() if " for " in head else ""
        name = re.sub(r"<.*", "", target).split("::")[-1].strip()
        out.append((a, b, name, trait.split("::")[-1]))
    return out


def impl_of(spans, offset):
    inside = [s for s in spans if s[0] < offset < s[1]]
    return min(inside, key=lambda s: s[1] - s[0]) if inside else None


def extract():
    """{reason: [(file, line, pattern)]} over the sources, and the exclusions that matched."""
    sources = []
    for root in SOURCES:
        for dirpath, _, files in os.walk(os.path.join(ROOT, root)):
            for name in sorted(files):
                if name.endswith(".rs") and name not in SKIPPED_FILES:
                    rel = os.path.relpath(os.path.join(dirpath, name), ROOT)
                    sources.append(Source(rel.replace(os.sep, "/")))
    constants = Constants(sources)
    found = defaultdict(list)
    used_exclusions = set()

    def add(value, src, offset, pattern):
        if value is not None and CAMEL.match(value):
            found[value].append((src.path, src.line(offset), pattern))

    def expression(src, a, b, pattern):
        """A literal or a constant path, given whole."""
        value = src.literal(a, b)
        if value is None:
            value = constants.resolve(src.code[a:b].strip(), src)
        add(value, src, a, pattern)

    def body(src, a, b, pattern):
        """Every literal and constant path in a function body."""
        for s, (e, value) in src.strings.items():
            if a < s < b:
                add(value, src, s, pattern)
        for m in re.finditer(r"(?<![\w:])((?:\w+::)*[A-Z][A-Z0-9_]+)\b(?!\s*[({:])",
                             src.code[a:b]):
            if a + m.start() in src.strings:
                continue
            add(constants.resolve(m.group(1), src), src, a + m.start(), pattern)

    for src in sources:
        spans = impls(src)
        for m, a, b in src.blocks(REASON_FN):
            impl = impl_of(spans, m.start())
            key = (src.path, impl[2] if impl else "")
            if key in NOT_CONDITIONS:
                used_exclusions.add(key)
                continue
            body(src, a, b, "reason-fn")
        for m, a, b in src.blocks(AS_STR_FN):
            impl = impl_of(spans, m.start())
            if impl and (impl[2] in ("Reason", "Cause") or impl[3] == "Reason"):
                body(src, a, b, "as-str")
        for m in CALL.finditer(src.code):
            if re.search(r"\bfn\s+$", src.code[max(0, m.start() - 8):m.start()]):
                continue
            for a, b in src.args(m.end() - 1):
                expression(src, a, b, "call")
        for m, a, b in src.blocks(STRUCT):
            for start, end in src.split(a + 1, b - 1):
                field = re.match(r"\s*reason\s*:", src.code[start:end])
                if field:
                    expression(src, start + field.end(), end, "struct")
    for c in constants.reason_mods:
        value = c["raw"] if c["literal"] else constants.resolve(c["raw"], c["src"])
        add(value, c["src"], c["offset"], "reason-mod")
    return found, used_exclusions


def documented(path):
    """The reasons the reference lists: the backticked first cell of each table row."""
    out = defaultdict(list)
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = re.match(r"^\s*\|\s*`([^`]+)`\s*\|", line)
            if m:
                out[m.group(1)].append(number)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--where", action="store_true")
    parser.add_argument("--doc", default=DOC)
    args = parser.parse_args()

    found, used = extract()
    stale = sorted(set(NOT_CONDITIONS) - used)
    if stale:
        for path, type_ in stale:
            print(f"check-reasons: NOT_CONDITIONS names {type_} in {path}, which has no "
                  "`fn reason` there any more: remove it", file=sys.stderr)
        return 1
    if args.list:
        for reason in sorted(found):
            if args.where:
                places = sorted(set(found[reason]))
                print(reason + "\t" + ", ".join(f"{p}:{n} ({k})" for p, n, k in places))
            else:
                print(reason)
        return 0

    doc_path = os.path.join(ROOT, args.doc)
    if not os.path.exists(doc_path):
        print(f"check-reasons: {args.doc} does not exist", file=sys.stderr)
        return 1
    docs = documented(doc_path)
    missing = sorted(set(found) - set(docs))
    gone = sorted(set(docs) - set(found))
    for reason in missing:
        path, line, kind = sorted(found[reason])[0]
        print(f"{args.doc}: reason {reason} is written by the code ({path}:{line}, {kind}) "
              "but not documented: add a row for it")
    for reason in gone:
        lines = ", ".join(str(n) for n in docs[reason])
        print(f"{args.doc}:{lines}: reason {reason} is documented but the code no longer "
              "writes it: remove its row")
    if missing or gone:
        return 1
    print(f"check-reasons: OK, the {len(found)} condition reasons the code writes are all "
          f"documented in {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
