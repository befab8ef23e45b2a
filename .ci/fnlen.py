#!/usr/bin/env python3
"""Lengths of the Rust functions under a directory, from `fn` to its closing
brace, test modules (`#[cfg(test)] mod …`) left out: the longest N, and with
--max M an exit status of 1 when any is longer than M lines."""
import argparse
import os
import re
import sys

FN = re.compile(r'\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?fn\s+(\w+)')
# String and character literals on one line, whose braces are not code.
LITERAL = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])\'')


def braces(line):
    """The line's `{` minus its `}`, outside literals and line comments; and
    whether it has a `{`."""
    code = LITERAL.sub('""', line).split('//', 1)[0]
    return code.count('{') - code.count('}'), '{' in code


def without_test_modules(text):
    out, lines, i = [], text.split('\n'), 0
    while i < len(lines):
        if lines[i].strip() == '#[cfg(test)]' and i + 1 < len(lines) and re.match(r'\s*mod \w+', lines[i + 1]):
            depth, started = 0, False
            while i < len(lines):
                delta, opens = braces(lines[i])
                depth += delta
                started = started or opens
                i += 1
                if started and depth <= 0:
                    break
            continue
        out.append(lines[i])
        i += 1
    return out


def functions(root):
    for folder, _, files in os.walk(root):
        for name in files:
            if not name.endswith('.rs') or name == 'tests.rs':
                continue
            path = os.path.join(folder, name)
            with open(path, encoding='utf-8') as f:
                lines = without_test_modules(f.read())
            for i, line in enumerate(lines):
                m = FN.match(line)
                if not m:
                    continue
                depth, started, j = 0, False, i
                while j < len(lines):
                    delta, opens = braces(lines[j])
                    depth += delta
                    started = started or opens
                    if ';' in lines[j] and not started:
                        break
                    if started and depth <= 0:
                        break
                    j += 1
                if started:
                    yield j - i + 1, path, m.group(5)


PROBE = """
fn short_with_literals() {
    let open = '{';
    let text = "}}} {{ \\" {";
    // a comment's brace: {
    let quote = '\\'';
}

pub(crate) async fn long() -> u32 {
%s    0
}

fn after_long<'a>(x: &'a str) -> &'a str {
    x
}

#[cfg(test)]
mod tests {
    fn long_test() {
%s    }
}
"""


def self_test():
    """Checks the counting on a probe file: literals', comments' and
    lifetimes' braces and quotes are not code, a long function is caught,
    test modules are left out."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        filler = '    let _ = 1;\n' * 90
        with open(os.path.join(root, 'probe.rs'), 'w', encoding='utf-8') as f:
            f.write(PROBE % (filler, filler))
        found = {name: n for n, _, name in functions(root)}
    expected = {'short_with_literals': 6, 'long': 93, 'after_long': 3}
    if found != expected:
        print(f'FAIL: fnlen counted {found}, expected {expected}', file=sys.stderr)
        return 1
    print('fnlen self-test: ok')
    return 0


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    parser = argparse.ArgumentParser()
    parser.add_argument('root')
    parser.add_argument('top', nargs='?', type=int, default=10)
    parser.add_argument('--max', type=int)
    args = parser.parse_args()
    found = sorted(functions(args.root), reverse=True)
    for n, path, name in found[:args.top]:
        print(n, path, name)
    if args.max is not None:
        over = [f for f in found if f[0] > args.max]
        for n, path, name in over:
            print(f'FAIL: {path} {name} is {n} lines (at most {args.max})', file=sys.stderr)
        return 1 if over else 0
    return 0


if __name__ == '__main__':
    sys.exit(main())
