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
import re
import textwrap
from typing import Dict, List, Optional, Sequence, Tuple

#: Packages of the fork that mirror ``ray.rllib``'s.
_SUBPACKAGES = "algorithms|connectors|core|env|evaluation|examples|offline|policy|utils"
_FORK_REFERENCE = re.compile(rf"(?<![\w./])rllib\.({_SUBPACKAGES})\b")
_LEFTOVER = re.compile(r"^\s*(from|import) rllib\b|rllib\._fork|\brllib\.is_active")

Substitution = Tuple[str, str]

#: Import lines `_add_imports` added during the current `splice`.
_ADDED: List[str] = []


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
    """Names the fork's modules as ray names them (``ray.rllib....``)."""
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
                found[target.id] = text[len("_upstream.") :]
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
    upstream_names = {
        getattr(n, "name", None) for n in ast.parse(upstream_text).body
    } | {
        t.id
        for n in ast.parse(upstream_text).body
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    }

    imports, helpers = [], []
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
        elif _defined_names(node) & upstream_names:
            continue  # Added by an earlier patch (or upstream's own).
        elif needed is not None and not (_defined_names(node) & needed):
            continue  # Used only by replacements of another patch.
        elif getattr(node, "name", None) in placed:
            continue
        elif (
            isinstance(node, ast.Assign)
            and ast.unparse(node) == 'logger = logging.getLogger("ray." + __name__)'
        ):
            continue  # Upstream modules log through their own `logger`.
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
    text = _add_imports(text, imports)
    for dotted, fork_name in replaces.items():
        if "." not in dotted and any(
            isinstance(n, ast.ClassDef) and n.name == fork_name for n in fork_tree.body
        ):
            text = text.replace(f"_upstream.{dotted}", f"_{dotted}Base")
    if helpers:
        text = text.rstrip("\n") + "\n\n\n" + "\n\n\n".join(helpers) + "\n"
    text = re.sub(r"\b_upstream\.", "", text)
    for alias, dotted in originals.items():
        default = _default_name(dotted.rsplit(".", 1)[-1])
        text = re.sub(rf"\b{alias}\(\s*self\s*,\s*", f"self.{default}(", text)
        text = re.sub(rf"\b{alias}\(\s*self\s*\)", f"self.{default}()", text)
    check_no_fork_leftovers(text, where)
    return text


def _default_name(method: str) -> str:
    """The private name upstream's original of ``method`` keeps."""
    return f"_{method.lstrip('_')}_default"


def _defined_names(node: ast.AST) -> set:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
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
            return _subclass(lines, fork_lines, target, fork_node)
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
    delegates = any(dotted == original for original in originals.values())
    if delegates:
        # Upstream's body stays, as the private default the new method calls.
        original = _renamed(
            _source(lines, target, False), parts[1], _default_name(parts[1])
        )
        text += "\n\n" + original
    return target.lineno, target.end_lineno, text


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
