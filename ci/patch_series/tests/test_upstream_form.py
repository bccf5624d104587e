"""How fork modules are written into ray's tree (pure text; no ray needed)."""

import ast
import textwrap

import pytest

from ci.patch_series import upstream_form

UPSTREAM = textwrap.dedent(
    '''\
    import logging
    from typing import List

    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.util.annotations import PublicAPI

    logger = logging.getLogger(__name__)


    def helper_upstream():
        return 1


    @PublicAPI
    class Thing:
        """Upstream's thing."""

        @staticmethod
        def from_state(state):
            return Thing()

        def get(self, key=DEFAULT_MODULE_ID):
            return key


    class Runner:
        def run(self):
            return "upstream"
    '''
)


def fork(source: str) -> str:
    return textwrap.dedent(source)


def test_method_replacement_keeps_upstream_decorators_and_adds_helpers():
    text = upstream_form.splice(
        UPSTREAM,
        fork(
            '''\
            """The fork's changes (dropped: it describes the overlay)."""

            from typing import Any, List

            from rllib.offline.episode_files.payload import ITEM_COLUMN


            def _from_state(state):
                """Builds it.

                Args:
                    self: Not documented on a method.
                    state: The state.
                """
                return _restore(state)


            def _restore(state):
                return ITEM_COLUMN, state


            REPLACES = {"Thing.from_state": staticmethod(_from_state)}
            '''
        ),
        (),
        "rllib/thing.py",
    )
    tree = ast.parse(text)
    thing = next(n for n in tree.body if getattr(n, "name", None) == "Thing")
    method = next(n for n in thing.body if getattr(n, "name", None) == "from_state")
    assert [ast.unparse(d) for d in method.decorator_list] == ["staticmethod"]
    assert "return _restore(state)" in ast.unparse(method)
    assert "self:" not in text and "REPLACES" not in text
    assert "The fork's changes" not in text
    # The helper and only the imports upstream lacks, named as ray names them.
    assert "def _restore(state):" in text
    assert "from ray.rllib.offline.episode_files.payload import ITEM_COLUMN" in text
    assert text.count("from typing import") == 1  # `Any` is unused, `List` bound.


def _delegating(body: str) -> str:
    header = (
        "from ray.rllib.offline import thing as _upstream\n\n"
        "_upstream_get = _upstream.Thing.get\n\n\n"
        "def get(self, key=DEFAULT_MODULE_ID):\n"
    )
    footer = '\n\nREPLACES = {"Thing.get": get}\n'
    return header + textwrap.indent(textwrap.dedent(body), "    ") + footer


@pytest.mark.parametrize(
    "body",
    [
        # New code before a final call of the original.
        """\
        if key is None:
            return None
        return _upstream_get(self, key)
        """,
        # An early hand-over to the original, then new code.
        """\
        if key is not None:
            return _upstream_get(self, key)
        return None
        """,
    ],
)
def test_a_branch_before_the_upstream_original_goes_into_upstreams_method(body):
    text = upstream_form.splice(UPSTREAM, _delegating(body), (), "rllib/thing.py")
    assert "_default" not in text and "_upstream." not in text
    assert "_upstream_get" not in text
    thing = _run(text)["Thing"]()
    assert thing.get("k") == "k" and thing.get(None) is None
    assert thing.get() == "default"  # Upstream's signature and default.


def test_new_keyword_arguments_join_upstreams_signature_and_docstring():
    upstream = textwrap.dedent(
        '''\
        class Settings:
            def configure(self, *, a=None):
                """Sets things.

                Args:
                    a: The first thing.

                Returns:
                    The settings.
                """
                if a is not None:
                    self.a = a
                return self
        '''
    )
    text = upstream_form.splice(
        upstream,
        fork(
            '''\
            from ray.rllib import settings as _upstream

            _upstream_configure = _upstream.Settings.configure


            def configure(self, *, b=None, **kwargs):
                """Sets things, and:

                Args:
                    b: The second thing, described at some length so that its entry
                        runs over two lines.
                    **kwargs: Upstream's arguments.
                """
                if b is not None:
                    self.b = b
                return _upstream_configure(self, **kwargs)


            REPLACES = {"Settings.configure": configure}
            '''
        ),
        (),
        "rllib/settings.py",
    )
    assert "_default" not in text and "kwargs" not in text
    assert "def configure(self, *, a=None, b=None):" in text
    doc = ast.get_docstring(ast.parse(text).body[0].body[0])
    assert doc.index("a: The first thing.") < doc.index("b: The second thing")
    assert doc.index("b: The second thing") < doc.index("Returns:")
    assert "two lines." in doc and "arguments" not in doc
    settings = _run(text)["Settings"]().configure(a=1, b=2)
    assert (settings.a, settings.b) == (1, 2)


def test_the_upstream_original_called_mid_method_stays_a_private_default():
    text = upstream_form.splice(
        UPSTREAM,
        _delegating(
            """\
            value = _upstream_get(self, key)
            return None if value is None else value + "!"
            """
        ),
        (),
        "rllib/thing.py",
    )
    thing = _run(text)["Thing"]()
    assert thing.get("k") == "k!" and thing._get_default("d") == "d"


def test_new_lines_before_a_function_or_classmethod_original_go_into_its_body():
    upstream = textwrap.dedent(
        '''\
        from ray.util.annotations import PublicAPI


        class Thing:
            @classmethod
            def load(cls, path):
                """Upstream's docstring."""
                # Upstream's comment on its first statement.
                return cls, path


        @PublicAPI
        def info(path):
            """Upstream's docstring."""
            return path
        '''
    )
    fork_module = textwrap.dedent(
        """\
        from ray.rllib.offline import thing as _upstream

        _upstream_load = _upstream.Thing.load.__func__
        _upstream_info = _upstream.info


        def load(cls, path):
            path = path.strip()
            return _upstream_load(cls, path)


        def info(path):
            path = path.strip()
            return _upstream_info(path)


        REPLACES = {"Thing.load": classmethod(load), "info": info}
        """
    )
    text = upstream_form.splice(upstream, fork_module, (), "rllib/thing.py")
    assert "_upstream" not in text
    assert text.count("path = path.strip()") == 2
    # After the docstring, before the comment that belongs to upstream's line.
    assert (
        '"""Upstream\'s docstring."""\n        path = path.strip()\n'
        "        # Upstream's comment" in text
    )
    assert "@PublicAPI\ndef info(path):" in text
    namespace = _run(text)
    assert namespace["Thing"].load(" p ") == (namespace["Thing"], "p")
    assert namespace["info"](" p ") == "p"


def _run(text):
    namespace = {}
    exec(
        compile(text.replace("from ray", "# from ray"), "t", "exec"),
        {"DEFAULT_MODULE_ID": "default", "PublicAPI": lambda c: c},
        namespace,
    )
    return namespace


def test_a_replaced_subclass_is_folded_into_upstreams_class():
    text = upstream_form.splice(
        UPSTREAM,
        fork(
            '''\
            from ray.rllib.offline import thing as _upstream


            class Runner(_upstream.Runner):
                """Runs, then says so."""

                def __init__(self, *args, extra: int = 1, **kwargs):
                    super().__init__(*args, **kwargs)
                    self.extra = extra

                def run(self):
                    return "fork+" + super().run()

                def added(self):
                    return self.extra


            REPLACES = {"Runner": Runner}
            '''
        ),
        (),
        "rllib/thing.py",
    )
    assert "_RunnerBase" not in text and "_upstream." not in text
    assert text.count("class Runner") == 1
    runner = _run(text)["Runner"](extra=5)
    # `run` calls upstream's inside an expression: upstream's stays as a twin.
    assert runner.run() == "fork+upstream" and runner.added() == 5
    assert runner._run_default() == "upstream"


def test_a_forwarding_init_gets_upstreams_body_and_the_new_parameters():
    upstream = textwrap.dedent(
        '''\
        class Thing:
            def __init__(self, *, config, spaces=None):
                """Upstream's docstring."""
                self.config = config
                self.spaces = spaces
        '''
    )
    text = upstream_form.splice(
        upstream,
        fork(
            """\
            from ray.rllib.x import thing as _upstream


            class Thing(_upstream.Thing):
                def __init__(self, *args, compute: bool = True, **kwargs):
                    super().__init__(*args, **kwargs)
                    self.compute = compute


            REPLACES = {"Thing": Thing}
            """
        ),
        (),
        "rllib/x/thing.py",
    )
    assert "super()" not in text and "*args" not in text
    thing = _run(text)["Thing"](config=1, spaces=2, compute=False)
    assert (thing.config, thing.spaces, thing.compute) == (1, 2, False)
    assert "Upstream's docstring." in text


def test_only_splices_the_named_replacements_with_their_helpers():
    source = fork(
        """\
        def get(self, key=None):
            return _one(key)


        def run(self):
            return _two()


        def _one(key):
            return key


        def _two():
            return 2


        REPLACES = {"Thing.get": get, "Runner.run": run}
        """
    )
    first = upstream_form.splice(UPSTREAM, source, (), "rllib/thing.py", ["Thing.get"])
    assert "def _one(" in first and "def _two(" not in first
    assert 'return "upstream"' in first
    second = upstream_form.splice(first, source, (), "rllib/thing.py", ["Runner.run"])
    assert second.count("def _one(") == 1 and "def _two(" in second
    with pytest.raises(upstream_form.UpstreamFormError, match="does not replace"):
        upstream_form.splice(UPSTREAM, source, (), "rllib/thing.py", ["Thing.nope"])


def test_imports_of_the_module_itself_are_dropped():
    text = upstream_form.splice(
        UPSTREAM,
        fork(
            """\
            def get(self, key=None):
                # Imported here: the overlay loads this module from a hook.
                from ray.rllib.thing import (
                    Thing,
                )

                return Thing


            REPLACES = {"Thing.get": get}
            """
        ),
        (),
        "rllib/thing.py",
    )
    assert "from ray.rllib.thing import" not in text and "Imported here" not in text
    assert "return Thing" in text


def test_substitutions_must_match_once_and_fork_references_must_go():
    source = "from rllib._fork.cluster_check import check\n\nX = 1\n"
    assert "X = 1" in upstream_form.new_module(
        source, [("from rllib._fork.cluster_check import check\n", "")], "a.py"
    )
    with pytest.raises(upstream_form.UpstreamFormError, match="matches 0 times"):
        upstream_form.new_module(source, [("nowhere", "")], "a.py")
    with pytest.raises(upstream_form.UpstreamFormError, match="still refers"):
        upstream_form.new_module(source, (), "a.py")


def test_new_modules_name_the_fork_package_as_ray_does():
    text = upstream_form.new_module(
        'from rllib.offline.tools import cli\nKEY = b"rllib.episodes"\n'
        '"""See `rllib.core.learner.value_targets`."""\n',
        (),
        "rllib/x.py",
    )
    assert "from ray.rllib.offline.tools import cli" in text
    assert 'b"rllib.episodes"' in text  # Not a module: left alone.
    assert "`ray.rllib.core.learner.value_targets`" in text


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
