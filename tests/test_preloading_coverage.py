"""Every model class of the installed diffusers that holds a module offloading must load with its children is offloaded
in every mode, and checked right, by the offload table or a scenario.

Such a module uses its children's weights without calling them: `nn.MultiheadAttention`, or a class declaring
`_preload_submodules = True` (offloading-loads-modules-that-read-child-weights.patch). The walk reads the source of the
installed diffusers, with the vendored modules in place of upstream's: a model holds a class when its `__init__`, or a
function or non-model class it calls there, calls that class. A new model holding one fails here until a tiny
pipeline of it is offloaded in every mode: a row of docs/offloading.md's table (TINY_OFFLOAD_PIPELINES,
tests/test_offload_modes.py) or one of the models of the scenario offload-models-holding-modules-loaded-whole
(TINY_PRELOADING_MODELS, tests/test_demo_scenarios.py).
"""

import ast
from importlib.metadata import distribution
from pathlib import Path

from diffusers_patched.selftest.tiny_pipelines import TINY_OFFLOAD_PIPELINES, TINY_PRELOADING_MODELS
from tests.conftest import REPO_ROOT


# model class -> its tiny pipeline, offloaded sequentially and group offloaded at leaf and block level
OFFLOADED_AS = {
    "HunyuanDiT2DModel": "hunyuan-dit",
    "AutoencoderKLMiniMaxH3Audio": "minimax-h3-audio-vae",
    "VQModel": "vq-vae",
    "HunyuanDiT2DControlNetModel": "hunyuan-dit-controlnet",
    "PaellaVQModel": "paella-vq-model",
    "ShapEParamsProjModel": "shap-e-params-proj",
    "ControlNetUnionModel": "controlnet-union",
}


def _source_files():
    upstream = Path(distribution("diffusers").locate_file("diffusers"))
    vendored = REPO_ROOT / "diffusers_patched" / "_vendor" / "diffusers"
    for path in sorted(upstream.rglob("*.py")):
        relative = path.relative_to(upstream)
        yield vendored / relative if (vendored / relative).exists() else path


def _called_names(node):
    return {
        call.func.id if isinstance(call.func, ast.Name) else call.func.attr
        for call in ast.walk(node)
        if isinstance(call, ast.Call) and isinstance(call.func, (ast.Name, ast.Attribute))
    }


def _definitions(tree):
    """{name: (called names, base names)} of the module-level functions and classes of `tree`; a class's calls are
    its `__init__`'s."""
    definitions = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            definitions[node.name] = (_called_names(node), set())
        elif isinstance(node, ast.ClassDef):
            init = [item for item in node.body if isinstance(item, ast.FunctionDef) and item.name == "__init__"]
            called = set().union(*map(_called_names, init))
            definitions[node.name] = (called, {ast.unparse(base).split(".")[-1] for base in node.bases})
    return definitions


def models_holding_modules_loaded_whole():
    texts = {path: path.read_text() for path in _source_files()}
    trees = {}
    loaded_whole = {"MultiheadAttention"}
    for path, text in texts.items():
        if "_preload_submodules = True" in text:
            trees[path] = ast.parse(text)
            loaded_whole.update(
                node.name
                for node in trees[path].body
                if isinstance(node, ast.ClassDef) and "_preload_submodules = True" in ast.unparse(node)
            )
    # Up from those classes, parsing only the files that name what was found: (name, is a model) of the holders.
    holders, frontier = set(), set(loaded_whole)
    while frontier:
        found = set()
        for path, text in texts.items():
            if not any(name in text for name in frontier):
                continue
            tree = trees.setdefault(path, ast.parse(text))
            for name, (called, bases) in _definitions(tree).items():
                if name not in holders and called & frontier:
                    holders.add(name)
                    # A model is walked on its own: what holds it does not hold its modules.
                    if not _is_model(name, texts, trees):
                        found.add(name)
        frontier = found
    return {name for name in holders if _is_model(name, texts, trees)}


def _is_model(name, texts, trees, seen=frozenset()):
    if name == "ModelMixin":
        return True
    for path, text in texts.items():
        if f"class {name}(" in text:
            bases = _definitions(trees.setdefault(path, ast.parse(text))).get(name, (set(), set()))[1]
            if any(base not in seen and _is_model(base, texts, trees, seen | {name}) for base in bases):
                return True
    return False


def test_every_model_holding_a_module_loaded_whole_is_offloaded_in_every_mode():
    assert models_holding_modules_loaded_whole() == set(OFFLOADED_AS)
    assert set(OFFLOADED_AS.values()) <= {*TINY_OFFLOAD_PIPELINES, *TINY_PRELOADING_MODELS}
