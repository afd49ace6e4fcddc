"""The release: the wheel built from this checkout installs into a fresh environment, where every
shipped data set loads, with the same values as from the checkout.

The fresh virtual environment has only the wheel (installed ``--no-deps``); the dependencies
(NumPy, SciPy, scikit-learn, torch) come from the running interpreter's site-packages, appended
after the fresh environment's own through a ``.pth`` line, so that the installed wheel, not the
checkout nor an editable install, is what ``import skrank`` finds (checked).
"""

import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Every loader of shipped data, with its arguments.
SHIPPED = {
    "mnist": ("load_mnist", {}),
    "bibtex-train": ("load_bibtex", {"subset": "train"}),
    "bibtex-test": ("load_bibtex", {"subset": "test"}),
    "corel5k-train": ("load_corel5k", {"subset": "train"}),
    "corel5k-test": ("load_corel5k", {"subset": "test"}),
}

# Runs in the fresh environment (and here, for the reference): a fingerprint of each data set.
FINGERPRINT = """
import json, sys
import numpy as np
import scipy.sparse as sp
import skrank
from skrank import datasets


def digest(a):
    a = a.toarray() if sp.issparse(a) else np.asarray(a)
    return [list(a.shape), float(np.asarray(a, dtype=float).sum()),
            float((np.asarray(a, dtype=float) ** 2).sum())]

def fingerprints(shipped):
    out = {"skrank": skrank.__file__, "version": skrank.__version__}
    for name, (loader, kwargs) in shipped.items():
        X, y = getattr(datasets, loader)(return_X_y=True, **kwargs)
        out[name] = [digest(X), digest(y)]
    return json.loads(json.dumps(out))

if __name__ == "__main__":
    print(json.dumps(fingerprints(json.loads(sys.argv[1]))))
"""


def _run(command, **kwargs):
    """``subprocess.run`` that shows the command's output when it fails."""
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{command[:4]} failed:\n{result.stdout}\n{result.stderr}"
    return result


def _fingerprints(python, cwd):
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = _run([str(python), "-c", FINGERPRINT, json.dumps(SHIPPED)], cwd=cwd, env=env)
    return json.loads(result.stdout)


def _build_wheel(out_dir):
    """``pip wheel`` of the checkout, offline when the installed setuptools can build it."""
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out_dir)]
    spec = importlib.util.find_spec("setuptools")
    if spec is not None:
        import setuptools

        if int(setuptools.__version__.split(".")[0]) >= 77:  # pyproject's build-system
            command.append("--no-build-isolation")
    _run([*command, str(ROOT)])
    (wheel,) = Path(out_dir).glob("skrank-*.whl")
    return wheel


@pytest.mark.slow
def test_wheel_installs_and_loads_every_shipped_data_set(tmp_path):
    wheel = _build_wheel(tmp_path / "dist")

    names = set(zipfile.ZipFile(wheel).namelist())
    data_files = sorted(
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "skrank" / "datasets" / "data").iterdir()
    )
    missing = [name for name in data_files if name not in names]
    assert not missing, f"data files missing from the wheel: {missing}"
    assert not any(name.startswith("tests/") for name in names)
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)

    env_dir = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    fresh_site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "--ignore-installed",  # pip runs from here, where it may see an installed skrank
            "-q",
            str(wheel),
        ]
    )

    # Then the dependencies from here, after the fresh site-packages (a .pth line is appended to
    # sys.path; .pth files inside that directory, such as an editable install's, are not run).
    here = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (fresh_site / "_skrank_test_dependencies.pth").write_text("\n".join(sorted(here)) + "\n")

    # Run away from the checkout, so that `import skrank` cannot find it by the working directory.
    installed = _fingerprints(python, cwd=tmp_path)
    assert Path(installed["skrank"]).is_relative_to(fresh_site), installed["skrank"]
    namespace = {}
    exec(FINGERPRINT, namespace)  # here, from the checkout under test
    expected = namespace["fingerprints"](SHIPPED)
    assert Path(expected["skrank"]).is_relative_to(ROOT), expected["skrank"]
    assert installed["version"] == expected["version"]
    for name in SHIPPED:
        assert installed[name] == expected[name], name  # same code, same numpy: exact
        assert expected[name][0][1] > 0, name  # the fingerprint sees values, not only shapes
