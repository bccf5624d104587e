"""Fingerprints of objects in Python source, from its syntax tree.

A fingerprint is a hash of a canonical dump of the statements that define an
object (``def``, ``class`` or assignment), found statically: comments,
docstrings and formatting do not count, positions are left out, and so are
empty and ``None`` fields, so the dump does not depend on the Python version
(a field that a newer Python adds with an empty default changes nothing).
``from x import name`` is followed to the defining module, and an attribute
that a class body does not define is looked up in its bases.

Used by the drift guard (:mod:`rllib._fork.fingerprints`) only when an
upstream file's hash differs from the recorded one, and by the maintainer
command (:mod:`rllib._fork.fingerprint_update`).
"""

import ast
import hashlib
import os
from typing import Optional

from rllib._fork.fingerprints import file_digest, object_key, read_source

# How many `from x import name` or base-class hops a definition may be away.
_MAX_HOPS = 16


def _canonical_dump(node) -> str:
    """A dump of ``node`` that ignores docstrings, positions and the Python version.

    Fields that are empty or ``None`` are left out, so a field that a newer
    Python adds with an empty default (e.g. ``type_params`` in 3.12) changes
    nothing; ``Constant.kind`` (the ``u`` prefix) and type comments are left
    out too.
    """
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    out = []

    def visit(value):
        if isinstance(value, ast.AST):
            out.append(type(value).__name__ + "(")
            for field in value._fields:
                if field in ("kind", "type_comment"):
                    continue
                child = getattr(value, field, None)
                if field == "body" and isinstance(value, scopes):
                    child = _without_docstring(child)
                if child is None or (isinstance(child, list) and not child):
                    continue
                out.append(field + "=")
                visit(child)
                out.append(",")
            out.append(")")
        elif isinstance(value, list):
            out.append("[")
            for item in value:
                visit(item)
                out.append(",")
            out.append("]")
        else:
            out.append(repr(value))

    visit(node)
    return "".join(out)


def _without_docstring(body):
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        return body[1:]
    return body


def _bindings(body, name: str) -> list:
    """Statements of one scope that bind ``name``, in source order.

    Looks into ``if``/``try``/``with`` blocks of the scope (not into nested
    functions or classes): ``def``, ``class``, assignments and
    ``from ... import``.
    """
    found = []
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if stmt.name == name:
                found.append(stmt)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(
                isinstance(n, ast.Name) and n.id == name
                for t in targets
                for n in ast.walk(t)
            ):
                found.append(stmt)
        elif isinstance(stmt, ast.ImportFrom):
            if any((a.asname or a.name) == name for a in stmt.names):
                found.append(stmt)
        elif isinstance(stmt, ast.If):
            found += _bindings(stmt.body, name) + _bindings(stmt.orelse, name)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            found += _bindings(stmt.body, name)
            for handler in stmt.handlers:
                found += _bindings(handler.body, name)
            found += _bindings(stmt.orelse, name) + _bindings(stmt.finalbody, name)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            found += _bindings(stmt.body, name)
    return found


def _imported_from(stmt, module: str, is_package: bool, name: str):
    """``(source module, name there)`` of a ``from ... import`` binding ``name``."""
    if stmt.level:
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(stmt.level - 1):
            package = package.rpartition(".")[0]
        source = f"{package}.{stmt.module}" if stmt.module else package
    else:
        source = stmt.module
    for alias in stmt.names:
        if (alias.asname or alias.name) == name:
            return source, alias.name
    raise AssertionError("unreachable: the statement binds the name")


class SourceTrees:
    """Parses upstream modules on demand; one parse per module."""

    def __init__(self):
        self._trees = {}
        self.read_modules = {}  # module -> file digest, for every file read

    def tree(self, module: str):
        if module not in self._trees:
            path, data = read_source(module)
            self.read_modules[module] = file_digest(data)
            self._trees[module] = (
                ast.parse(data, filename=path),
                os.path.basename(path) == "__init__.py",
            )
        return self._trees[module]

    def fingerprint(self, module: str, qualname: str) -> Optional[str]:
        """The fingerprint of ``module:qualname``, or None if it is not defined.

        The hash covers where the definition was found (see :meth:`resolve`)
        and the canonical dump of every statement binding it there.
        """
        found = self.resolve(module, qualname)
        if found is None:
            return None
        where, nodes = found
        dump = "\n".join([where, *(_canonical_dump(n) for n in nodes)])
        return hashlib.sha256(dump.encode("utf-8")).hexdigest()[:16]

    def resolve(self, module: str, qualname: str, hops: int = 0):
        """Finds the statements that define ``module:qualname`` statically.

        Follows ``from x import name`` to the defining module, and an
        attribute that a class body does not bind to the class's bases (left
        to right, depth first), as attribute lookup would find it.

        Returns:
            ``("module:qualname" where found, [statements])``, or None.
        """
        if hops > _MAX_HOPS:
            return None
        tree, is_package = self.tree(module)
        parts = qualname.split(".")
        body, cls = tree.body, None
        for depth, part in enumerate(parts):
            nodes = _bindings(body, part)
            if not nodes:
                if cls is None:
                    return None
                return self._resolve_in_bases(
                    module, cls, ".".join(parts[depth:]), hops
                )
            last = nodes[-1]
            if isinstance(last, ast.ImportFrom):
                source, name = _imported_from(last, module, is_package, part)
                rest = ".".join([name, *parts[depth + 1 :]])
                return self.resolve(source, rest, hops + 1)
            if depth == len(parts) - 1:
                return object_key(module, qualname), nodes
            classes = [n for n in nodes if isinstance(n, ast.ClassDef)]
            if not classes:
                return None
            cls = classes[-1]
            body = cls.body
        return None  # Unreachable: the loop returns on its last part.

    def _resolve_in_bases(self, module: str, cls, attribute: str, hops: int):
        for base in cls.bases:
            name = _dotted_name(base)
            if name is None:
                continue
            found = self.resolve(module, f"{name}.{attribute}", hops + 1)
            if found is not None:
                return found
        return None


def _dotted_name(node) -> Optional[str]:
    """``"a.b.C"`` for a ``Name``/``Attribute`` chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def object_fingerprint(source: str, qualname: str) -> Optional[str]:
    """Fingerprints one object defined in a module's source text.

    Args:
        source: A module's source code.
        qualname: The object's dotted name inside the module (``"f"``,
            ``"Class"``, ``"Class.method"``).

    Returns:
        A 16-hex-digit hash of the canonical syntax tree of every statement
        that binds the object in its scope (a property and its setter count
        together), or None if the source does not define it.
    """
    trees = SourceTrees()
    trees._trees["<source>"] = (ast.parse(source), False)
    return trees.fingerprint("<source>", qualname)
