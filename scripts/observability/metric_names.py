#!/usr/bin/env python3
"""The metric names that Prometheus rules and a Grafana dashboard use (Python 3, stdlib only).

    metric_names.py dashboard-rules DASHBOARD.json
        Prints a Prometheus rule file with every panel target's `expr` as a recording rule,
        Grafana's variables replaced by concrete values, for `promtool check rules`.
    metric_names.py names [--rules FILE]... [--dashboard FILE]...
        Prints the metric names the expressions reference, one a line, with where.
    metric_names.py recorded --rules FILE... [--dashboard FILE]...
        Fails (exit 1), listing them, when an expression uses a recording rule's name (one
        with `:`) that no `record:` of the rule files makes.
    metric_names.py check --metrics FILE [--rules FILE]... [--dashboard FILE]...
        Fails (exit 1), listing them, when a referenced name is not in FILE (the text of a
        GET /metrics). A histogram's `_bucket`, `_sum` and `_count` count as present when FILE
        declares the base name a histogram (or a summary: `_sum`, `_count`), a counter's
        `_total` when FILE declares the name without it a counter (OpenMetrics).

Not counted: recording-rule names (they contain `:`), `up` (made by Prometheus), PromQL's
functions, aggregations and keywords, label names. The rule files are read with a small
YAML reader that knows the forms an `expr:` takes in them (plain, quoted, `|` and `>`
blocks); it fails rather than skip an expression it cannot find.
"""

import json
import re
import sys

# Grafana's built-in interval variables, as concrete values.
GRAFANA_BUILTINS = {
    "__rate_interval": "5m",
    "__interval": "1m",
    "__range": "1h",
    "__interval_ms": "60000",
    "__range_ms": "3600000",
    "__range_s": "3600",
}
# Any other variable (`$instance`, `${instance}`, `${instance:regex}`, `[[instance]]`):
# used in label matchers, so a value that matches anything.
OTHER_VARIABLE_VALUE = ".+"
VARIABLE = re.compile(r"\$\{([A-Za-z_]\w*)(?::[^}]*)?\}|\$([A-Za-z_]\w*)|\[\[([A-Za-z_]\w*)(?::[^\]]*)?\]\]")

AGGREGATIONS = {
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
    "bottomk", "topk", "quantile", "limitk", "limit_ratio",
}
LABEL_LIST_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "start", "end", "atan2"}
NOT_METRICS = {"up"}


def fail(message):
    print(f"metric_names.py: error: {message}", file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------- PromQL


def tokens(expr):
    """PromQL tokens as (kind, text): string, number, ident, or the character itself."""
    i, n = 0, len(expr)
    while i < n:
        c = expr[i]
        if c.isspace():
            i += 1
        elif c == "#":
            while i < n and expr[i] != "\n":
                i += 1
        elif c in "\"'`":
            j = i + 1
            while j < n and expr[j] != c:
                j += 2 if expr[j] == "\\" and c != "`" else 1
            if j >= n:
                raise ValueError(f"unterminated string in: {expr}")
            yield "string", expr[i + 1:j]
            i = j + 1
        elif c.isdigit() or (c == "." and i + 1 < n and expr[i + 1].isdigit()):
            m = re.compile(r"[0-9A-Za-z_.]+(?:[eE][+-][0-9]+)?").match(expr, i)
            yield "number", m.group(0)
            i = m.end()
        elif c.isalpha() or c in "_:":
            m = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*").match(expr, i)
            yield "ident", m.group(0)
            i = m.end()
        else:
            yield c, c
            i += 1


def metric_names(expr):
    """The metric names an expression selects (recording rules and `up` included)."""
    toks = list(tokens(expr))
    names = []
    braces = brackets = 0
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        following = toks[i + 1][0] if i + 1 < len(toks) else None
        if kind == "{":
            braces += 1
        elif kind == "}":
            braces -= 1
        elif kind == "[":
            brackets += 1
        elif kind == "]":
            brackets -= 1
        elif kind == "ident" and braces > 0:
            # A label matcher; `__name__="x"` names a metric.
            if text == "__name__" and i + 2 < len(toks) and toks[i + 1][0] == "=" and toks[i + 2][0] == "string":
                names.append(toks[i + 2][1])
        elif kind == "ident" and brackets == 0:
            word = text.lower()
            if word in LABEL_LIST_KEYWORDS:
                if following == "(":  # skip the label list
                    depth, i = 0, i + 1
                    while i < len(toks):
                        if toks[i][0] == "(":
                            depth += 1
                        elif toks[i][0] == ")":
                            depth -= 1
                            if depth == 0:
                                break
                        i += 1
            elif following == "(" or word in AGGREGATIONS or word in KEYWORDS:
                pass  # a function, an aggregation or a keyword
            else:
                names.append(text)
        i += 1
    return names


def counted(name):
    return ":" not in name and name not in NOT_METRICS


# ---------------------------------------------------------------- rule files


def rule_expressions(path):
    """(where, expr) of every rule in a Prometheus rule file."""
    try:
        lines = open(path, encoding="utf-8").read().split("\n")
    except OSError as error:
        fail(f"cannot read {path}: {error}")
    key = re.compile(r"^(\s*(?:-\s+)?)expr:(?:\s+(.*))?$")
    rules = sum(1 for line in lines if re.match(r"^\s*(?:-\s+)?(?:record|alert):\s", line))
    found = []
    i = 0
    while i < len(lines):
        m = key.match(lines[i])
        if not m:
            i += 1
            continue
        column = len(m.group(1))
        value = (m.group(2) or "").strip()
        where = f"{path}:{i + 1}"
        i += 1
        if re.fullmatch(r"[|>][+-]?", value) or value == "":
            body = []
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > column):
                body.append(lines[i].strip())
                i += 1
            expr = "\n".join(body).strip()
        elif value.startswith('"'):
            m2 = re.fullmatch(r'"((?:[^"\\]|\\.)*)"\s*(?:#.*)?', value)
            if not m2:
                fail(f"{where}: a double-quoted expr must end on its line")
            expr = re.sub(r"\\(.)", lambda e: {"n": "\n", "t": "\t"}.get(e.group(1), e.group(1)), m2.group(1))
        elif value.startswith("'"):
            m2 = re.fullmatch(r"'((?:[^']|'')*)'\s*(?:#.*)?", value)
            if not m2:
                fail(f"{where}: a single-quoted expr must end on its line")
            expr = m2.group(1).replace("''", "'")
        else:
            parts = [re.sub(r"\s+#.*$", "", value)]
            while i < len(lines) and lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) > column:
                parts.append(re.sub(r"\s+#.*$", "", lines[i].strip()))
                i += 1
            expr = " ".join(parts)
        if not expr:
            fail(f"{where}: empty expr")
        found.append((where, expr))
    if len(found) != rules:
        fail(f"{path}: {rules} rules but {len(found)} expr keys read; write each expr as `expr: ...` or `expr: |`")
    return found


# ---------------------------------------------------------------- dashboards


def dashboard_targets(path):
    """(panel id, panel title, refId, expr) of every panel target with an expr."""
    try:
        dashboard = json.load(open(path, encoding="utf-8"))
    except (OSError, ValueError) as error:
        fail(f"cannot read {path}: {error}")
    found = []

    def walk(panels):
        for panel in panels or []:
            for target in panel.get("targets") or []:
                expr = target.get("expr")
                if isinstance(expr, str) and expr.strip():
                    found.append((panel.get("id"), panel.get("title", ""), target.get("refId", "A"), expr))
            walk(panel.get("panels"))

    walk(dashboard.get("panels"))
    return found


def substitute_variables(expr):
    def value(m):
        name = m.group(1) or m.group(2) or m.group(3)
        return GRAFANA_BUILTINS.get(name, OTHER_VARIABLE_VALUE)

    return VARIABLE.sub(value, expr)


def dashboard_rules(path):
    targets = dashboard_targets(path)
    if not targets:
        fail(f"{path}: no panel target has an expr")
    out = [f"# Generated from {path} by scripts/observability/metric_names.py: one rule a panel target.",
           "groups:", "  - name: grafana-dashboard", "    rules:"]
    for index, (panel_id, title, ref_id, expr) in enumerate(targets):
        record = f"dashboard:panel_{panel_id if isinstance(panel_id, int) else index}_{re.sub(r'[^A-Za-z0-9_]', '_', str(ref_id))}"
        out.append(f"      # {title}".rstrip())
        out.append(f"      - record: {record}")
        out.append(f"        expr: {json.dumps(substitute_variables(expr), ensure_ascii=False)}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- /metrics text


def exposition(path):
    """(names with samples, {name: type}) of a Prometheus or OpenMetrics text."""
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError as error:
        fail(f"cannot read {path}: {error}")
    samples, types = set(), {}
    for line in text.splitlines():
        line = line.strip()
        m = re.match(r"#\s*TYPE\s+(\S+)\s+(\S+)", line)
        if m:
            types[m.group(1)] = m.group(2).lower()
        elif line and not line.startswith("#"):
            m = re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line)
            if m:
                samples.add(m.group(0))
    return samples, types


def present(name, samples, types):
    if name in samples or name in types:
        return True
    for suffix, kinds in (("_bucket", {"histogram", "gaugehistogram"}), ("_sum", {"histogram", "summary"}),
                          ("_count", {"histogram", "summary"}), ("_total", {"counter"})):
        if name.endswith(suffix) and types.get(name[: -len(suffix)]) in kinds:
            return True
    return False


# ---------------------------------------------------------------- command line


def recorded_names(path):
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as error:
        fail(f"cannot read {path}: {error}")
    return {m.group(1).strip("'\"") for m in re.finditer(r"(?m)^\s*(?:-\s+)?record:\s*(\S+)", text)}


def referenced(rules, dashboards, keep=counted):
    """{metric name: [where]} over the rule files and dashboards."""
    names = {}
    for path in rules:
        for where, expr in rule_expressions(path):
            try:
                found = metric_names(expr)
            except ValueError as error:
                fail(f"{where}: {error}")
            for name in found:
                if keep(name):
                    names.setdefault(name, []).append(where)
    for path in dashboards:
        for panel_id, title, ref_id, expr in dashboard_targets(path):
            try:
                found = metric_names(substitute_variables(expr))
            except ValueError as error:
                fail(f"{path}: panel {panel_id}: {error}")
            for name in found:
                if keep(name):
                    names.setdefault(name, []).append(f"{path}: panel {panel_id} ({title}) {ref_id}")
    return names


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "dashboard-rules":
        if len(rest) != 1:
            fail("dashboard-rules takes one dashboard file")
        sys.stdout.write(dashboard_rules(rest[0]))
        return 0
    if command not in ("names", "recorded", "check"):
        fail(f"unknown command {command!r} (dashboard-rules, names, recorded, check)")
    rules, dashboards, metrics = [], [], None
    while rest:
        option = rest.pop(0)
        if option in ("--rules", "--dashboard", "--metrics") and not rest:
            fail(f"{option} needs a file")
        if option == "--rules":
            rules.append(rest.pop(0))
        elif option == "--dashboard":
            dashboards.append(rest.pop(0))
        elif option == "--metrics":
            metrics = rest.pop(0)
        else:
            fail(f"unknown option {option!r}")
    if not rules and not dashboards:
        fail("name at least one --rules or --dashboard file")
    if command == "recorded":
        if not rules:
            fail("recorded needs the --rules files that record the names")
        made = set().union(*(recorded_names(path) for path in rules))
        used = referenced(rules, dashboards, keep=lambda name: ":" in name)
        unknown = sorted(name for name in used if name not in made)
        if unknown:
            print(f"{len(unknown)} recording rule name(s) are used but recorded by no rule:", file=sys.stderr)
            for name in unknown:
                print(f"  {name}  (used at {used[name][0]})", file=sys.stderr)
            return 1
        print(f"all {len(used)} recording rule names used are recorded ({len(made)} recorded)")
        return 0
    names = referenced(rules, dashboards)
    if command == "names":
        for name in sorted(names):
            print(f"{name}\t{names[name][0]}" + (f" (and {len(names[name]) - 1} more)" if len(names[name]) > 1 else ""))
        return 0
    if metrics is None:
        fail("check needs --metrics FILE")
    samples, types = exposition(metrics)
    if not samples and not types:
        fail(f"{metrics} holds no metric at all: is it the text of GET /metrics?")
    missing = sorted(name for name in names if not present(name, samples, types))
    if missing:
        print(f"{len(missing)} metric name(s) used by the rules or the dashboard are not in {metrics}:", file=sys.stderr)
        for name in missing:
            print(f"  {name}  (used at {names[name][0]}" + (f" and {len(names[name]) - 1} more)" if len(names[name]) > 1 else ")"),
                  file=sys.stderr)
        return 1
    print(f"all {len(names)} metric names used by the rules and the dashboard are in {metrics}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
