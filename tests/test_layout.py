"""The code's shape, checked: small files, short functions, and deferred imports that say why.

The layering itself (stages importing only the stages below them, no cycles)
is import-linter's job (``lint-imports``, contracts in pyproject.toml).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "optsched"
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


def _sources() -> list[tuple[Path, str, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        out.append((path.relative_to(PACKAGE.parent), text, ast.parse(text)))
    return out


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _is_argparse_registration(text: str, func: ast.AST) -> bool:
    """A function that mostly declares command-line options may be long: it reads as a table."""
    return (ast.get_source_segment(text, func) or "").count(".add_argument(") >= 5


def test_no_file_is_over_400_lines() -> None:
    long = {str(path): len(text.splitlines()) for path, text, _ in _sources()}
    assert {p: n for p, n in long.items() if n > MAX_FILE_LINES} == {}


def test_no_function_is_over_60_lines_argparse_registration_aside() -> None:
    too_long = {
        f"{path}:{func.name}": (func.end_lineno or func.lineno) - func.lineno + 1
        for path, text, tree in _sources()
        for func in _functions(tree)
        if (func.end_lineno or func.lineno) - func.lineno + 1 > MAX_FUNCTION_LINES
        and not _is_argparse_registration(text, func)
    }
    assert too_long == {}


def test_an_import_inside_a_function_says_why_it_is_deferred() -> None:
    silent = []
    for path, text, tree in _sources():
        lines = text.splitlines()
        for func in _functions(tree):
            for node in ast.walk(func):
                if not isinstance(node, ast.Import | ast.ImportFrom):
                    continue
                nearby = lines[max(0, node.lineno - 4) : node.lineno]
                if not any("#" in line for line in nearby):
                    silent.append(f"{path}:{node.lineno}")
    assert silent == []
