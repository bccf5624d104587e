"""The form a fork file takes inside ray's own tree.

The fork keeps its code under the package ``rllib`` and applies it with an
overlay; ray keeps the same code under ``ray.rllib``, edited in place. This
module turns one into the other:

- a new module (one upstream does not have) is copied with every reference to
  the fork's package (``rllib.offline...``) named as ray names it
  (``ray.rllib.offline...``);
- a replacing module (one with ``REPLACES``) is spliced into the upstream
  source: a replaced function or method takes the place of upstream's, keeping
  upstream's decorators; a replaced class that subclasses upstream's becomes
  that subclass, with upstream's class kept under a private base name; a
  replacement that delegates to the upstream original keeps that original as a
  private ``_<name>_default`` method; the module's helpers go to the end of the
  upstream module and its imports after upstream's.

Lines that exist only for the overlay (the cluster check) are removed by the
substitutions each topic declares; every substitution must match exactly once,
so a stale one fails the build instead of leaking fork code into a patch.
"""

import ast
import copy
import re
import textwrap
from typing import Dict, List, Optional, Sequence, Tuple

#: Packages of the fork that mirror ``ray.rllib``'s.
_SUBPACKAGES = "algorithms|connectors|core|env|evaluation|examples|offline|policy|utils"
_FORK_REFERENCE = re.compile(rf"(?<![\w./])rllib\.({_SUBPACKAGES})\b")
_LEFTOVER = re.compile(
    r"^\s*(from|import) rllib\b|rllib\._fork|\brllib\.is_active|rllib-fork"
)

Substitution = Tuple[str, str]

#: How the fork's messages that name its own package read in ray: the package
#: to upgrade or install is ray (these apply wherever they occur).
RELEASE_WORDING: Sequence[Substitution] = (
    ("Upgrade rllib-fork.", "Upgrade ray."),
    ("upgrade rllib-fork.", "upgrade ray."),
    ("this rllib-fork has no", "this ray has no"),
)

#: Import lines `_add_imports` added during the current `splice`.
_ADDED: List[str] = []
#: Classes of the current `splice` whose fork subclass was merged into them.
_MERGED: set = set()


class UpstreamFormError(ValueError):
    """A fork file cannot be put into upstream form as declared."""


def apply_substitutions(
    text: str, substitutions: Sequence[Substitution], where: str
) -> str:
    for old, new in substitutions:
        count = text.count(old)
        if count != 1:
            raise UpstreamFormError(
                f"{where}: the substitution of {old[:60]!r} matches {count} "
                "times, not once. Update it in ci/patch_series/series.py."
            )
        text = text.replace(old, new)
    return text


def rename_references(text: str) -> str:
    """Names the fork's modules as ray names them (``ray.rllib....``), and
    words the messages that name the fork's package for ray."""
    for old, new in RELEASE_WORDING:
        text = text.replace(old, new)
    return _FORK_REFERENCE.sub(lambda m: "ray." + m.group(0), text)


def check_no_fork_leftovers(text: str, where: str) -> None:
    for number, line in enumerate(text.splitlines(), 1):
        if _LEFTOVER.search(line):
            raise UpstreamFormError(
                f"{where}:{number}: still refers to the fork: {line.strip()!r}. "
                "Declare a substitution for it in ci/patch_series/series.py."
            )


def new_module(text: str, substitutions: Sequence[Substitution], where: str) -> str:
    """A fork module upstream does not have, as it reads in ray's tree."""
    text = rename_references(apply_substitutions(text, substitutions, where))
    check_no_fork_leftovers(text, where)
    return text


def _source(lines: List[str], node: ast.AST, with_decorators: bool = True) -> str:
    start = node.lineno
    if with_decorators and getattr(node, "decorator_list", None):
        start = min(d.lineno for d in node.decorator_list)
    return "\n".join(lines[start - 1 : node.end_lineno])


def _start(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", None) or []
    return min([node.lineno] + [d.lineno for d in decorators])


def _replaces(tree: ast.Module) -> Dict[str, str]:
    """``REPLACES`` as {upstream dotted name: fork function or class name}."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "REPLACES"
        ):
            result = {}
            for key, value in zip(node.value.keys, node.value.values):
                if isinstance(value, ast.Call):  # staticmethod(fn), classmethod(fn)
                    value = value.args[0]
                if not isinstance(value, ast.Name):
                    raise UpstreamFormError(
                        f"REPLACES[{key.value!r}] must name a function or class "
                        "defined in the module."
                    )
                result[key.value] = value.id
            return result
    return {}


def _originals(tree: ast.Module) -> Dict[str, str]:
    """Module names bound to upstream originals: {alias: upstream dotted name}."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            text = ast.unparse(node.value)
            if isinstance(target, ast.Name) and text.startswith("_upstream."):
                # A classmethod's original is its function (`.__func__`).
                dotted = text[len("_upstream.") :]
                found[target.id] = dotted.removesuffix(".__func__")
    return found


def _is_upstream_import(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        if node.module and node.module.startswith("rllib._fork"):
            return True
        return any(alias.asname == "_upstream" for alias in node.names)
    return False


def splice(
    upstream_text: str,
    fork_text: str,
    substitutions: Sequence[Substitution],
    where: str,
    only: Optional[Sequence[str]] = None,
) -> str:
    """The upstream module with the fork module's changes made in place.

    ``where`` is the file's path in ray's tree (``rllib/...py``). ``only``: the
    ``REPLACES`` names to splice (default: all); the module's helpers follow
    the replacements that use them, and a helper already in the upstream text
    (from an earlier patch) is not added again.
    """
    module = "ray." + where[: -len(".py")].replace("/", ".").removesuffix(".__init__")
    _ADDED.clear()
    _MERGED.clear()
    text = drop_self_imports(
        _splice(upstream_text, fork_text, substitutions, where, only), module
    )
    return drop_unused_imports(text, list(_ADDED))


def _splice(
    upstream_text: str,
    fork_text: str,
    substitutions: Sequence[Substitution],
    where: str,
    only: Optional[Sequence[str]],
) -> str:
    fork_text = rename_references(apply_substitutions(fork_text, substitutions, where))
    fork_tree = ast.parse(fork_text)
    fork_lines = fork_text.splitlines()
    all_replaces = _replaces(fork_tree)
    if only is not None:
        unknown = set(only) - set(all_replaces)
        if unknown:
            raise UpstreamFormError(f"{where} does not replace {sorted(unknown)}")
    replaces = {k: v for k, v in all_replaces.items() if only is None or k in set(only)}
    originals = {
        alias: dotted
        for alias, dotted in _originals(fork_tree).items()
        if dotted in replaces
    }
    placed = set(all_replaces.values())
    needed = _needed_helpers(fork_tree, replaces) if only is not None else None
    upstream_names = set().union(
        *(_defined_names(n) for n in ast.parse(upstream_text).body)
    )

    imports, helpers = [], []
    super_helpers = {
        node.name: _source(fork_lines, node)
        for node in fork_tree.body
        if _is_super_helper(node)
    }
    body = fork_tree.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
    ):
        body = body[1:]  # The fork module's docstring describes the overlay.
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if not _is_upstream_import(node):
                imports.append(_source(fork_lines, node))
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name)
            and (t.id == "REPLACES" or t.id in _originals(fork_tree))
            for t in node.targets
        ):
            continue
        elif (
            isinstance(node, ast.Assign)
            and ast.unparse(node).replace("'", '"')
            == 'logger = logging.getLogger("ray." + __name__)'
        ):
            # Upstream's module logs through its own `logger`; one outside the
            # logger hierarchy (`logging.Logger(__file__)`) becomes the
            # module's named logger, as the fork's code logs.
            upstream_text = re.sub(
                r"^logger = logging\.Logger\(__file__\)$",
                "logger = logging.getLogger(__name__)",
                upstream_text,
                flags=re.M,
            )
        elif _defined_names(node) & upstream_names:
            continue  # Added by an earlier patch (or upstream's own).
        elif needed is not None and not (_defined_names(node) & needed):
            continue  # Used only by replacements of another patch.
        elif getattr(node, "name", None) in placed:
            continue
        elif getattr(node, "name", None) in super_helpers:
            continue  # In the class, `super()` itself (below).
        else:
            helpers.append(_source(fork_lines, node))

    lines = upstream_text.splitlines()
    upstream_tree = ast.parse(upstream_text)
    edits: List[Tuple[int, int, str]] = []  # (first line, last line, new text)
    for dotted, fork_name in replaces.items():
        fork_node = next(
            (n for n in fork_tree.body if getattr(n, "name", None) == fork_name), None
        )
        if fork_node is None:
            raise UpstreamFormError(
                f"{where}: REPLACES[{dotted!r}] is `{fork_name}`, which the module "
                "does not define; define replacements in the module that "
                "declares them."
            )
        edits.append(
            _replacement(upstream_tree, lines, fork_lines, fork_node, dotted, originals)
        )
    for first, last, text in sorted(edits, reverse=True):
        lines[first - 1 : last] = text.splitlines()

    text = "\n".join(lines) + "\n"
    for name, source in super_helpers.items():
        # The fork's methods reach the class's base through a helper; spliced
        # into the class they call `super()`.
        text = re.sub(rf"\b{name}\(self\)\.", "super().", text)
        if re.search(rf"\b{name}\(", text) or any(
            re.search(rf"\b{name}\(", helper) for helper in helpers
        ):
            helpers.append(source)
    text = _add_imports(text, imports)
    for dotted, fork_name in replaces.items():
        if "." not in dotted and any(
            isinstance(n, ast.ClassDef) and n.name == fork_name for n in fork_tree.body
        ):
            base = dotted if dotted in _MERGED else f"_{dotted}Base"
            text = text.replace(f"_upstream.{dotted}", base)
    if helpers:
        text = text.rstrip("\n") + "\n\n\n" + "\n\n\n".join(helpers) + "\n"
    text = re.sub(r"\b_upstream\.", "", text)
    for alias, dotted in originals.items():
        default = _default_name(dotted.rsplit(".", 1)[-1])
        text = re.sub(rf"\b{alias}\((\s*)self\s*,[ \t]*", rf"self.{default}(\1", text)
        text = re.sub(rf"\b{alias}\(\s*self\s*\)", f"self.{default}()", text)
    check_no_fork_leftovers(text, where)
    return text


def _is_super_helper(node: ast.AST) -> bool:
    """Whether ``node`` is a fork helper ``def _super(obj): ... return
    super(Class, obj)``, the overlay's stand-in for ``super()``."""
    if not isinstance(node, ast.FunctionDef) or len(node.args.args) != 1:
        return False
    last = node.body[-1]
    return (
        isinstance(last, ast.Return)
        and isinstance(last.value, ast.Call)
        and isinstance(last.value.func, ast.Name)
        and last.value.func.id == "super"
        and len(last.value.args) == 2
    )


def _default_name(method: str) -> str:
    """The private name upstream's original of ``method`` keeps."""
    return f"_{method.lstrip('_')}_default"


def _defined_names(node: ast.AST) -> set:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        # `torch, nn = try_import_torch()` defines both names.
        return {
            n.id
            for t in node.targets
            for n in ([t] if isinstance(t, ast.Name) else getattr(t, "elts", []))
            if isinstance(n, ast.Name)
        }
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


def _needed_helpers(tree: ast.Module, replaces: Dict[str, str]) -> set:
    """Module-level names the chosen replacements use, transitively."""
    by_name = {}
    for node in tree.body:
        for name in _defined_names(node):
            by_name[name] = node
    needed, todo = set(), list(replaces.values())
    while todo:
        name = todo.pop()
        if name in needed or name not in by_name:
            continue
        needed.add(name)
        todo.extend(n.id for n in ast.walk(by_name[name]) if isinstance(n, ast.Name))
    return needed


def _replacement(upstream_tree, lines, fork_lines, fork_node, dotted, originals):
    parts = dotted.split(".")
    if len(parts) == 1:
        target = _find(upstream_tree.body, parts[0], dotted)
        if isinstance(fork_node, ast.ClassDef):
            if not any(
                ast.unparse(b) == f"_upstream.{target.name}" for b in fork_node.bases
            ):
                # A class written anew (an Enum with more members cannot
                # subclass upstream's): it takes upstream's place.
                _MERGED.add(target.name)
                return _start(target), target.end_lineno, _source(fork_lines, fork_node)
            try:
                merged = _merged_class(lines, fork_lines, target, fork_node)
            except _CannotMerge:
                return _subclass(lines, fork_lines, target, fork_node)
            _MERGED.add(target.name)
            return _start(target), target.end_lineno, merged
        aliases = [alias for alias, original in originals.items() if original == dotted]
        if aliases and isinstance(fork_node, ast.FunctionDef):
            inlined = _inline_delegation(
                lines, fork_lines, target, fork_node, aliases[0]
            )
            if inlined is not None:  # Upstream's decorators stay as they are.
                return target.lineno, target.end_lineno, inlined
        text = _renamed(_source(fork_lines, fork_node), fork_node.name, parts[0])
        return _start(target), target.end_lineno, text
    owner = _find(upstream_tree.body, parts[0], dotted)
    target = _find(owner.body, parts[1], dotted, required=False)
    if target is None:  # A method the class inherits upstream: added to it.
        indent = " " * (owner.body[0].col_offset)
        text = textwrap.indent(
            _renamed(_source(fork_lines, fork_node, False), fork_node.name, parts[1]),
            indent,
        )
        return owner.end_lineno + 1, owner.end_lineno, "\n" + text
    indent = " " * target.col_offset
    text = textwrap.indent(
        _renamed(_source(fork_lines, fork_node, False), fork_node.name, parts[1]),
        indent,
    )
    aliases = [alias for alias, original in originals.items() if original == dotted]
    if aliases:
        inlined = _inline_delegation(
            lines, fork_lines, target, fork_node, aliases[0]
        ) or _inline_keyword_extension(lines, fork_lines, target, fork_node, aliases[0])
        if inlined is not None:
            return target.lineno, target.end_lineno, inlined
        # Upstream's body stays, as the private default the new method calls.
        original = _renamed(
            _source(lines, target, False), parts[1], _default_name(parts[1])
        )
        text += "\n\n" + original
    return target.lineno, target.end_lineno, text


def _calls_alias(stmt: ast.stmt, alias: str) -> bool:
    """Whether ``stmt`` is ``alias(self, ...)`` or ``return alias(self, ...)``."""
    value = getattr(stmt, "value", None)
    return (
        isinstance(stmt, (ast.Expr, ast.Return))
        and isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == alias
    )


def _negated(condition: ast.expr) -> str:
    swaps = {ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}
    if (
        isinstance(condition, ast.Compare)
        and len(condition.ops) == 1
        and type(condition.ops[0]) in swaps
    ):
        flipped = ast.Compare(
            condition.left, [swaps[type(condition.ops[0])]()], condition.comparators
        )
        return ast.unparse(flipped)
    if isinstance(condition, ast.UnaryOp) and isinstance(condition.op, ast.Not):
        return ast.unparse(condition.operand)
    return f"not ({ast.unparse(condition)})"


def _inline_delegation(lines, fork_lines, target, fork, alias) -> Optional[str]:
    """Upstream's method with the fork's new code in it, where the fork only
    adds a branch before delegating to upstream's original (``if C: return
    original(self, ...)`` first, or a call of the original last); else None.

    The fork's parameters must be upstream's, so the new code reads the same
    names.
    """
    fork_params = [a.arg for a in fork.args.args + fork.args.kwonlyargs]
    upstream_params = [a.arg for a in target.args.args + target.args.kwonlyargs]
    if fork_params != upstream_params or (
        (fork.args.vararg is None) != (target.args.vararg is None)
        or (fork.args.kwarg is None) != (target.args.kwarg is None)
    ):
        return None
    body = _body_without_docstring(fork)
    upstream_body = _body_without_docstring(target)
    if not body or not upstream_body:
        return None
    indent = " " * target.col_offset
    inner = indent + "    "
    # The fork's lines go after upstream's docstring, so that the comments
    # above upstream's first statement stay with it.
    if upstream_body is target.body:
        header_end = upstream_body[0].lineno - 1
    else:
        header_end = target.body[0].end_lineno
    out = _reindented(lines, target.lineno, header_end, indent)
    if upstream_body is target.body and body is not fork.body:
        doc = fork.body[0]
        out += _reindented(fork_lines, doc.lineno, doc.end_lineno, inner)
    first = body[0]
    upstream_text = _reindented(lines, header_end + 1, target.end_lineno, inner)
    if (
        isinstance(first, ast.If)
        and not first.orelse
        and len(first.body) == 1
        and _calls_alias(first.body[0], alias)
        and isinstance(first.body[0], ast.Return)
        and len(body) > 1
    ):
        rest = _reindented(
            fork_lines, body[1].lineno, body[-1].end_lineno, inner + "    "
        )
        out.append(f"{inner}if {_negated(first.test)}:")
        out += rest
        if not isinstance(body[-1], (ast.Return, ast.Raise)):
            out.append(inner + "    return")
        out += upstream_text
        return "\n".join(out)
    last = body[-1]
    if _calls_alias(last, alias) and not any(
        _calls_alias(stmt, alias) for stmt in body[:-1]
    ):
        if len(body) > 1:
            out += _reindented(fork_lines, body[0].lineno, body[-2].end_lineno, inner)
        out += upstream_text
        return "\n".join(out)
    return None


class _CannotMerge(Exception):
    """The fork's subclass cannot be folded into upstream's class."""


def _members(body) -> Dict[str, List[ast.AST]]:
    """Class members by name (a property and its setter share one)."""
    found: Dict[str, List[ast.AST]] = {}
    for node in body:
        for name in _defined_names(node):
            found.setdefault(name, []).append(node)
    return found


def _args_entries(doc_lines: List[str], names: Sequence[str]) -> List[List[str]]:
    """The ``Args:`` entries for ``names`` in a docstring, each as its lines."""
    entries: Dict[str, List[str]] = {}
    current, entry_indent, in_args = None, None, False
    for line in doc_lines:
        stripped = line.strip()
        if stripped == "Args:":
            in_args = True
            continue
        if not in_args:
            continue
        indent = len(line) - len(line.lstrip())
        if stripped and entry_indent is None:
            entry_indent = indent
        if stripped and indent == entry_indent:
            current = stripped.split(":", 1)[0].lstrip("*")
            entries[current] = []
        elif stripped and indent < (entry_indent or 0):
            break  # The next section.
        if current is not None and stripped:
            entries[current].append(line)
    return [entries[name] for name in names if name in entries]


def _inline_keyword_extension(lines, fork_lines, target, fork, alias) -> Optional[str]:
    """Upstream's method with the fork's new keyword arguments in it, where
    the fork takes only new keyword-only arguments and ``**kwargs``, handles
    the new ones, and ends with ``return original(self, **kwargs)``: the new
    arguments join upstream's signature, their ``Args:`` entries its
    docstring, and the fork's lines run first; else None."""
    kwarg = fork.args.kwarg
    if kwarg is None or target.args.kwarg is not None or fork.args.vararg:
        return None
    if len(fork.args.args) != 1:
        return None
    upstream_names = {a.arg for a in target.args.args + target.args.kwonlyargs}
    new_names = [a.arg for a in fork.args.kwonlyargs]
    if not new_names or upstream_names & set(new_names):
        return None
    body = _body_without_docstring(fork)
    if len(body) < 2 or not _calls_alias(body[-1], alias):
        return None
    call = body[-1].value
    if not (
        isinstance(body[-1], ast.Return)
        and len(call.args) == 1
        and [k.arg for k in call.keywords] == [None]
        and ast.unparse(call.keywords[0].value) == kwarg.arg
    ):
        return None
    if _body_without_docstring(target) is target.body:
        return None  # Upstream's method has no docstring to add the entries to.
    indent = " " * target.col_offset
    inner = indent + "    "
    merged = copy.deepcopy(target)
    out = [indent + _merged_signature(merged, fork)]
    doc = target.body[0]
    doc_lines = lines[doc.lineno - 1 : doc.end_lineno]
    fork_doc = fork.body[0]
    entries = _args_entries(
        fork_lines[fork_doc.lineno - 1 : fork_doc.end_lineno], new_names
    )
    args_at = next(
        (i for i, line in enumerate(doc_lines) if line.strip() == "Args:"), None
    )
    if args_at is None or not entries:
        return None
    entry_indent = inner + "    "
    end = args_at + 1
    while end < len(doc_lines) and (
        not doc_lines[end].strip() or doc_lines[end].startswith(entry_indent)
    ):
        end += 1
    while not doc_lines[end - 1].strip():
        end -= 1  # Before the blank line that ends the section.
    # Each entry refilled at its new indentation, within ray's 88 columns.
    filled = []
    for entry in entries:
        filled += textwrap.wrap(
            " ".join(line.strip() for line in entry),
            width=88,
            initial_indent=entry_indent,
            subsequent_indent=entry_indent + "    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    doc_lines = doc_lines[:end] + filled + doc_lines[end:]
    out += doc_lines
    out += _reindented(fork_lines, body[0].lineno, body[-2].end_lineno, inner)
    out += lines[doc.end_lineno : target.end_lineno]
    return "\n".join(out)


def _body_without_docstring(node: ast.FunctionDef) -> List[ast.stmt]:
    body = node.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
    ):
        return body[1:]
    return body


def _reindented(lines: List[str], first: int, last: int, indent: str) -> List[str]:
    """Lines ``first``..``last`` (1-based), moved to ``indent``."""
    chunk = lines[first - 1 : last]
    return textwrap.indent(textwrap.dedent("\n".join(chunk)), indent).splitlines()


def _super_calls(node: ast.AST):
    """(statement, method name) for statements that call ``super().<name>(...)``."""
    for stmt in ast.walk(node):
        if isinstance(stmt, (ast.Expr, ast.Return)) and isinstance(
            stmt.value, ast.Call
        ):
            func = stmt.value.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Call)
                and isinstance(func.value.func, ast.Name)
                and func.value.func.id == "super"
                and not func.value.args
            ):
                yield stmt, func.attr


def _merged_signature(upstream: ast.FunctionDef, fork: ast.FunctionDef) -> str:
    """Upstream's parameters plus the fork's new keyword parameters."""
    names = {a.arg for a in upstream.args.args + upstream.args.kwonlyargs}
    extra = [
        (arg, default)
        for arg, default in zip(fork.args.kwonlyargs, fork.args.kw_defaults)
        if arg.arg not in names
    ]
    positional = fork.args.args[1:]
    defaults = [None] * (len(positional) - len(fork.args.defaults)) + list(
        fork.args.defaults
    )
    extra += [(a, d) for a, d in zip(positional, defaults) if a.arg not in names]
    args = upstream.args
    for arg, default in extra:
        if default is None:
            raise _CannotMerge(f"new parameter `{arg.arg}` has no default")
        args.kwonlyargs.append(arg)
        args.kw_defaults.append(default)
    returns = f" -> {ast.unparse(upstream.returns)}" if upstream.returns else ""
    return f"def {upstream.name}({ast.unparse(args)}){returns}:"


def _inlined_call(upstream: ast.FunctionDef, fork: ast.FunctionDef):
    """The fork method's statement that calls ``super()`` for itself, if
    upstream's body can take its place; else None."""
    own = [stmt for stmt, name in _super_calls(fork) if name == fork.name]
    if len(own) != 1:
        return None
    returns = any(isinstance(n, ast.Return) for n in ast.walk(upstream))
    if isinstance(own[0], ast.Expr) and returns:
        return None  # An early return in upstream's body would skip the fork's.
    return own[0]


def _merged_method(lines, fork_lines, upstream, fork, indent, rewrite) -> List[str]:
    """Upstream's method with the fork's body, upstream's body inlined where
    the fork calls ``super()`` for it."""
    out = [
        line
        for d in upstream.decorator_list
        for line in _reindented(lines, d.lineno, d.end_lineno, indent)
    ]
    forwards = fork.args.vararg is not None or fork.args.kwarg is not None
    if forwards or len(fork.args.args) != len(upstream.args.args):
        out.append(indent + _merged_signature(upstream, fork))
    else:
        body_start = upstream.body[0].lineno if upstream.body else upstream.lineno + 1
        out += _reindented(lines, upstream.lineno, body_start - 1, indent)
    body_indent = indent + "    "
    fork_body = _body_without_docstring(fork)
    if fork_body is not fork.body:
        doc = fork.body[0]
        out += _reindented(fork_lines, doc.lineno, doc.end_lineno, body_indent)
    elif _body_without_docstring(upstream) is not upstream.body:
        doc = upstream.body[0]
        out += _reindented(lines, doc.lineno, doc.end_lineno, body_indent)
    if not fork_body:
        return out
    upstream_body = _body_without_docstring(upstream)
    replaced = {}
    stmt = _inlined_call(upstream, fork)
    if stmt is not None and upstream_body:
        replaced[stmt.lineno] = (
            stmt.end_lineno,
            _reindented(
                lines,
                upstream_body[0].lineno,
                upstream.end_lineno,
                " " * stmt.col_offset,
            ),
        )
    chunk, number = [], fork_body[0].lineno
    while number <= fork.end_lineno:
        if number in replaced:
            end, new_lines = replaced[number]
            chunk += new_lines
            number = end + 1
            continue
        chunk.append(rewrite([fork_lines[number - 1]])[0])
        number += 1
    out += textwrap.indent(textwrap.dedent("\n".join(chunk)), body_indent).splitlines()
    return out


def _fork_super_calls(lines: List[str], upstream_members, twins) -> List[str]:
    """The fork's ``super().<name>(...)`` calls, in the merged class.

    A twin's call goes to ``self._<name>_default``; a method of upstream's
    class is now the class's own (``self.<name>``); a method upstream's class
    only inherits stays a ``super()`` call. Only the fork's lines are
    rewritten: upstream's own ``super()`` calls keep meaning its base.
    """

    def rewrite(match):
        name = match.group(1)
        if name in twins:
            return f"self.{_default_name(name)}("
        if name in upstream_members:
            return f"self.{name}("
        return match.group(0)

    return [re.sub(r"super\(\)\.(\w+)\(", rewrite, line) for line in lines]


def _twins(upstream_members, fork_members) -> set:
    """Upstream methods the merged class must keep as ``_<name>_default``:
    those the fork calls through ``super()`` where their body cannot be
    inlined."""
    twins = set()
    for name, nodes in fork_members.items():
        for node in nodes:
            for call in ast.walk(node):
                if not (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and isinstance(call.func.value, ast.Call)
                    and isinstance(call.func.value.func, ast.Name)
                    and call.func.value.func.id == "super"
                ):
                    continue
                called = call.func.attr
                if called not in fork_members or called not in upstream_members:
                    continue
                upstream = upstream_members[called][0]
                inlined = (
                    called == name
                    and isinstance(node, ast.FunctionDef)
                    and isinstance(upstream, ast.FunctionDef)
                    and (stmt := _inlined_call(upstream, node)) is not None
                    and stmt.value is call
                )
                if not inlined:
                    twins.add(called)
    return twins


def _merged_class(lines, fork_lines, target, fork_node) -> str:
    """Upstream's class with the fork subclass's members folded into it."""
    if not any(ast.unparse(b) == f"_upstream.{target.name}" for b in fork_node.bases):
        raise _CannotMerge("not a subclass of upstream's class")
    upstream_members = _members(target.body)
    fork_members = _members(fork_node.body)
    indent = " " * target.body[0].col_offset
    twins = _twins(upstream_members, fork_members)

    def rewrite(fork_source: List[str]) -> List[str]:
        return _fork_super_calls(fork_source, upstream_members, twins)

    out: List[str] = []
    header_end = _start(target.body[0]) - 1
    out += lines[_start(target) - 1 : header_end]
    fork_doc = fork_node.body[0]
    has_fork_doc = isinstance(fork_doc, ast.Expr) and isinstance(
        fork_doc.value, ast.Constant
    )
    upstream_doc = target.body[0]
    has_upstream_doc = isinstance(upstream_doc, ast.Expr) and isinstance(
        upstream_doc.value, ast.Constant
    )
    if has_fork_doc:
        out += _reindented(fork_lines, fork_doc.lineno, fork_doc.end_lineno, indent)
    elif has_upstream_doc:
        out += _reindented(lines, upstream_doc.lineno, upstream_doc.end_lineno, indent)
    done = set()
    body = target.body[1:] if has_upstream_doc else target.body
    for node in body:
        names = _defined_names(node)
        overridden = [n for n in names if n in fork_members]
        out.append("")
        if not overridden:
            out += _reindented(lines, _start(node), node.end_lineno, indent)
            continue
        name = overridden[0]
        if name in done:
            continue
        done.add(name)
        out += _fork_members_source(
            lines,
            fork_lines,
            upstream_members[name],
            fork_members[name],
            indent,
            rewrite,
        )
    for name, nodes in fork_members.items():
        if name in done or name in upstream_members:
            continue
        if nodes[0] is fork_doc and has_fork_doc:
            continue
        out.append("")
        for node in nodes:
            out += rewrite(
                _without_self_override(
                    _reindented(fork_lines, _start(node), node.end_lineno, indent),
                    target.name,
                )
            )
    for name in sorted(twins):
        original = upstream_members[name][0]
        out.append("")
        out += _renamed(
            "\n".join(_reindented(lines, original.lineno, original.end_lineno, indent)),
            name,
            _default_name(name),
        ).splitlines()
    text = "\n".join(out)
    text = text.replace(f"_upstream.{target.name}", target.name)
    if f"@override({target.name})" in text:
        raise _CannotMerge("a member would override its own class")
    return text


def _fork_members_source(
    lines, fork_lines, upstream_nodes, fork_nodes, indent, rewrite
):
    """The fork's members that replace upstream's members of the same name."""
    upstream = upstream_nodes[0]
    fork = fork_nodes[0]
    if (
        len(fork_nodes) == 1
        and len(upstream_nodes) == 1
        and isinstance(fork, ast.FunctionDef)
        and isinstance(upstream, ast.FunctionDef)
        and not [d for d in fork.decorator_list if "override" not in ast.unparse(d)]
    ):
        return _merged_method(lines, fork_lines, upstream, fork, indent, rewrite)
    out = []
    for node in fork_nodes:
        out += _reindented(fork_lines, _start(node), node.end_lineno, indent)
    return rewrite(_without_self_override(out, ""))


def _without_self_override(lines: List[str], class_name: str) -> List[str]:
    """Drops ``@override(_upstream.<class>)``: in the merged class it would
    name the class itself."""
    return [
        line
        for line in lines
        if not re.fullmatch(r"\s*@override\(_upstream\.\w+\)", line)
    ]


def _subclass(lines, fork_lines, target, fork_node):
    """Upstream's class under a private name, then the fork's subclass of it."""
    base = f"_{target.name}Base"
    upstream_class = _source(lines, target)
    upstream_class = re.sub(
        rf"^(\s*)class {target.name}\b",
        rf"\1class {base}",
        upstream_class,
        count=1,
        flags=re.M,
    )
    subclass = _source(fork_lines, fork_node).replace(f"_upstream.{target.name}", base)
    return _start(target), target.end_lineno, upstream_class + "\n\n\n" + subclass


def _renamed(source: str, old: str, new: str) -> str:
    return _without_self_arg_doc(
        re.sub(rf"\bdef {old}\(", f"def {new}(", source, count=1)
    )


def _without_self_arg_doc(source: str) -> str:
    """Drops a docstring's ``self:`` entry (a method documents no ``self``)."""
    lines = source.splitlines()
    kept, skip_deeper_than = [], None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if skip_deeper_than is not None:
            if line.strip() and indent > skip_deeper_than:
                continue
            skip_deeper_than = None
        if re.match(r"\s+self: ", line):
            skip_deeper_than = indent
            continue
        kept.append(line)
    return "\n".join(kept)


def _find(nodes, name: str, dotted: str, required: bool = True):
    for node in nodes:
        if getattr(node, "name", None) == name:
            return node
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return node
    if not required:
        return None
    raise UpstreamFormError(f"upstream defines no `{dotted}`")


def _bound_names(tree: ast.Module) -> set:
    """Names the module's top-level imports bind."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
    return names


def _add_imports(text: str, imports: List[str]) -> str:
    """Adds the names of the fork's imports that upstream does not bind yet,
    after upstream's imports."""
    tree = ast.parse(text)
    bound = _bound_names(tree)
    # After upstream's last import of the same kind: ray's own, or any other.
    last_any = last_other = None
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            last_any = node.end_lineno
            if not _is_ray_import(node):
                last_other = node.end_lineno
        elif last_any is not None:
            break
    ray_imports, other_imports = [], []
    for source in imports:
        node = ast.parse(rename_references(source)).body[0]
        names = [
            a for a in node.names if (a.asname or a.name.split(".")[0]) not in bound
        ]
        if not names:
            continue
        node.names = names
        bound.update(a.asname or a.name.split(".")[0] for a in names)
        group = ray_imports if _is_ray_import(node) else other_imports
        group.append(ast.unparse(node))
    _ADDED.extend(ray_imports + other_imports)
    lines = text.splitlines()
    at = last_any or 0
    lines[at:at] = sorted(ray_imports)
    at = last_other if last_other is not None else 0
    lines[at:at] = sorted(other_imports)
    return "\n".join(lines) + "\n"


def _is_ray_import(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == "ray"
    return any(alias.name.split(".")[0] == "ray" for alias in node.names)


def drop_unused_imports(text: str, added: List[str]) -> str:
    """Removes names of the ``added`` import lines that the module never uses."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line not in added:
            continue
        node = ast.parse(line).body[0]
        rest = "\n".join(
            line for line in lines[:index] + lines[index + 1 :] if line is not None
        )
        used = [
            a
            for a in node.names
            if re.search(rf"\b{re.escape(a.asname or a.name.split('.')[0])}\b", rest)
        ]
        if used:
            node.names = used
            lines[index] = ast.unparse(node)
        else:
            lines[index] = None
    return "\n".join(line for line in lines if line is not None) + "\n"


def drop_self_imports(text: str, module: str) -> str:
    """Removes imports of ``module`` from itself (the overlay needed them)."""
    lines: List[Optional[str]] = text.splitlines()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module == module:
            first, last = node.lineno - 1, node.end_lineno - 1
            while first > 0 and lines[first - 1].strip().startswith("# Imported here"):
                first -= 1
            if last + 1 < len(lines) and not lines[last + 1].strip():
                last += 1
            for index in range(first, last + 1):
                lines[index] = None
    text = "\n".join(line for line in lines if line is not None) + "\n"
    text = re.sub(r"\n*if TYPE_CHECKING:\n(?=\n*(?:\S|\Z))", "\n\n\n", text)
    return re.sub(r"\n{4,}", "\n\n\n", text)
