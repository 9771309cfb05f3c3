"""The installed product works from a wheel alone: sql/, udfs/, taxonomies/ and the demo data are packaged."""
from __future__ import annotations

import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.wheel
def test_wheel_installs_into_fresh_venv_and_runs_demo(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(dist)], check=True, cwd=tmp_path)
    wheel = next(dist.glob("anon_sql-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    # the fresh venv borrows the already-installed dependencies (offline), but not the editable checkout:
    # a path added by a .pth file is not a site dir, so its editable-install hooks do not run there
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    where = subprocess.run([str(py), "-c", "import anon_sql, anon_sql.udfs.kernels as k; print(anon_sql.__file__);"
                            "print(k.__file__)"], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert all(str(venv) in line for line in where.stdout.split()), where.stdout
    demo = subprocess.run([str(venv / "bin" / "anon-sql"), "demo"], capture_output=True, text=True, cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert "VERIFIED" in demo.stdout
