"""Every LanceDB filter is a typed expression (``storage/filters.py``), never text with values pasted in:
checked on the source. Only ``storage/`` reaches LanceDB (``tests/test_architecture.py``), so it is the only
place a filter could be built from a user's text."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILTER_METHODS = {"where", "delete"}  # table.search().where(f), table.delete(f); table.update(where=f)


def textual(node: ast.expr) -> bool:
    """Whether ``node`` builds text: a string, an f-string, a concatenation or %-format, .format or .join."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, ast.Add | ast.Mod) and (textual(node.left) or textual(node.right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in {"format", "join"} and textual(node.func.value)
    return False


def filter_arguments(tree: ast.AST) -> list[tuple[ast.expr, ast.AST]]:
    """(filter argument, the function it is in) for every filtering call in ``tree``."""
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.Module):
            continue
        for node in ast.walk(function):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            if node.func.attr in FILTER_METHODS and node.args:
                found.append((node.args[0], function))
            found += [(k.value, function) for k in node.keywords if k.arg == "where"]
    return found


def assigned_text(name: str, function: ast.AST) -> bool:
    """Whether ``name`` is given a text value anywhere in ``function``."""
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AugAssign | ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and textual(value):
            return True
    return False


def test_no_lancedb_filter_is_built_from_text():
    offenders, checked = [], 0
    for path in sorted((ROOT / "storage").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for argument, function in filter_arguments(tree):
            checked += 1
            pasted = textual(argument) or (
                isinstance(argument, ast.Name) and assigned_text(argument.id, function)
            )
            if pasted:
                offenders.append(f"{path.relative_to(ROOT)}:{argument.lineno}")
    assert checked >= 10 and offenders == []


def test_every_value_in_a_filter_expression_is_a_literal_node():
    # In storage/filters.py an expression builder only makes text inside lit(...): one literal value.
    tree = ast.parse((ROOT / "storage" / "filters.py").read_text())
    builders = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and isinstance(node.returns, ast.Name)
        and node.returns.id == "Expr"
    ]
    pasted = []
    for builder in builders:
        inside_lit = {
            id(argument)
            for node in ast.walk(builder)
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lit"
            for argument in node.args
        }
        pasted += [
            f"{builder.name}:{node.lineno}"
            for node in ast.walk(builder)
            if isinstance(node, ast.JoinedStr | ast.BinOp) and textual(node) and id(node) not in inside_lit
        ]
    assert len(builders) >= 6 and pasted == []


def test_the_checks_flag_text_pasted_into_a_filter():
    pasted = ast.parse(
        "def read(table, org):\n"
        "    condition = f\"org_id = '{org}'\"\n"
        "    table.search().where(condition)\n"
        '    table.delete("id = \'" + org + "\'")\n'
        "    table.update(where='org_id = {}'.format(org), values={})\n"
    )
    flagged = [
        argument.lineno
        for argument, function in filter_arguments(pasted)
        if textual(argument) or (isinstance(argument, ast.Name) and assigned_text(argument.id, function))
    ]
    assert sorted(set(flagged)) == [3, 4, 5]
