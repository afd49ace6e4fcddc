"""The torch estimators and the gallery are written on the engine's public contract: no module of
``skrank/embedding``, ``skrank/multilabel`` or ``examples`` imports a private module of
``skrank.nn`` or uses a private member of its classes (an AST walk)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ROOT / "skrank" / "nn"
CLIENTS = sorted(
    [
        *(ROOT / "skrank" / "embedding").rglob("*.py"),
        *(ROOT / "skrank" / "multilabel").rglob("*.py"),
        *(ROOT / "examples").glob("*.py"),
    ]
)


def _is_private(name):
    return name.startswith("_") and not name.startswith("__")


def _engine_classes():
    """``{class name: (names of its skrank.nn bases, its private members)}`` for every class of
    ``skrank/nn``: methods, class attributes and the attributes its methods set on ``self``."""
    classes = {}
    for path in ENGINE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            members = set()
            for item in ast.walk(node):
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    members.add(item.name)
                elif isinstance(item, ast.Name) and isinstance(item.ctx, ast.Store):
                    members.add(item.id)
                elif (
                    isinstance(item, ast.Attribute)
                    and isinstance(item.ctx, ast.Store)
                    and isinstance(item.value, ast.Name)
                    and item.value.id == "self"
                ):
                    members.add(item.attr)
            bases = {base.id for base in node.bases if isinstance(base, ast.Name)}
            classes[node.name] = (bases, {name for name in members if _is_private(name)})
    return classes


ENGINE_CLASSES = _engine_classes()
ENGINE_PRIVATE = set().union(*(members for _, members in ENGINE_CLASSES.values()))


def _private_of(class_name):
    """The private members of an engine class and of its engine bases."""
    if class_name not in ENGINE_CLASSES:
        return set()
    bases, members = ENGINE_CLASSES[class_name]
    return members.union(*(_private_of(base) for base in bases))


def _violations(path, source=None):
    """``(line, what)`` of every use of the engine's private modules or members in ``path``
    (whose text is ``source`` when given)."""
    tree = ast.parse(path.read_text() if source is None else source)
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            package = module.split(".")[: -node.level] if node.level else []
            target = ".".join([*package, *(node.module or "").split(".")]).strip(".")
            names = [target + "." + alias.name for alias in node.names]
            names.append(target)
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["skrank", "nn"] and len(parts) > 2 and _is_private(parts[2]):
                found.append((node.lineno, f"imports {name}"))
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        bases = {base.id for base in cls.bases if isinstance(base, ast.Name)}
        inherited = set().union(*(_private_of(base) for base in bases))
        for node in ast.walk(cls):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and node.attr in inherited
            ):
                found.append((node.lineno, f"self.{node.attr}, a private member of its base"))
    for node in ast.walk(tree):
        # On any other object (an estimator given to a callback, a class): any engine class's.
        if (
            isinstance(node, ast.Attribute)
            and not (isinstance(node.value, ast.Name) and node.value.id == "self")
            and node.attr in ENGINE_PRIVATE
        ):
            found.append((node.lineno, f".{node.attr}, a private member of an engine class"))
    return sorted(set(found))


def test_the_walk_sees_the_engine_and_its_clients():
    assert {"BaseTorchEstimator", "Callback", "EarlyStopping"} <= set(ENGINE_CLASSES)
    assert {"_context", "_device", "_train", "_notify"} <= _private_of("BaseTorchEstimator")
    names = {path.name for path in CLIENTS}
    assert {"_soprc_embedder.py", "_snm.py", "plot_engine_contrastive.py"} <= names


def test_the_walk_finds_private_uses():
    client = ROOT / "skrank" / "embedding" / "_client.py"  # read from source, never written
    source = (
        "from ..nn._data import input_dtypes\n"
        "import skrank.nn._engine\n"
        "from skrank.nn import BaseTorchEstimator, Callback\n"
        "class Model(BaseTorchEstimator):\n"
        "    def fit(self, X, y):\n"
        "        return self._split_validation(X, y), self._own\n"
        "class Watch(Callback):\n"
        "    def on_epoch_end(self, estimator, epoch, record):\n"
        "        return estimator._context, self._step\n"
    )
    found = [what for _, what in _violations(client, source)]
    assert found == [
        "imports skrank.nn._data",
        "imports skrank.nn._data.input_dtypes",
        "imports skrank.nn._engine",
        "self._split_validation, a private member of its base",
        "._context, a private member of an engine class",
    ]


@pytest.mark.parametrize("path", CLIENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_uses_only_the_public_engine(path):
    violations = _violations(path)
    assert not violations, "\n".join(f"{path.name}:{line}: {what}" for line, what in violations)
