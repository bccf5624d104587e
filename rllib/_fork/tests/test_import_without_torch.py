"""Where upstream RLlib imports without torch, it does so with the fork too.

Ray's own CI imports RLlib in environments without torch (its configs, the
framework-agnostic Learner, the offline modules). A fork module that imports
torch at module level would break every one of those imports, since the
overlay runs it when its upstream module is imported.
"""

import json
import sys

import pytest

from rllib._fork import registry
from rllib._fork.tests.helpers import run_python

#: Hides torch from the interpreter, as in an environment without it.
_WITHOUT_TORCH = """
import importlib, importlib.abc, json, sys


class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}")


sys.meta_path.insert(0, NoTorch())
imported = {}
for name in sys.argv[1:] or MODULES:
    try:
        importlib.import_module(name)
        imported[name] = "ok"
    except Exception as error:
        imported[name] = f"{type(error).__name__}: {error}"
import rllib
print(json.dumps({"active": rllib.is_active(), "imported": imported}))
"""

#: The replaced upstream modules, and the configs users import first.
MODULES = [registry.upstream_name(m) for m in registry.REPLACING_MODULES] + [
    "ray.rllib.algorithms.ppo",
    "ray.rllib.algorithms.bc",
    "ray.rllib.algorithms.marwil",
    "ray.rllib.algorithms.cql",
    "ray.rllib.algorithms.iql",
]


def _imports(env):
    line, _ = run_python(
        f"MODULES = {MODULES!r}\n" + _WITHOUT_TORCH, env=env, timeout=300
    )
    return json.loads(line)


@pytest.mark.timeout(600)
def test_fork_imports_without_torch_wherever_upstream_does():
    upstream = _imports({"RLLIB_FORK_DISABLE": "1"})
    fork = _imports({})
    assert upstream["active"] is False and fork["active"] is True
    without_torch = [m for m, result in upstream["imported"].items() if result == "ok"]
    # The configs, the Learner and the offline modules import without torch.
    assert "ray.rllib.algorithms.ppo" in without_torch
    assert "ray.rllib.core.learner.learner" in without_torch
    assert {m: fork["imported"][m] for m in without_torch} == dict.fromkeys(
        without_torch, "ok"
    )


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
