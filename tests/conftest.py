"""Shared fixtures: data locations, connections, and the seed 000 / Adult policies used across tests."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Iterator

import duckdb
import pytest
from hypothesis import settings

import anon_sql

# No test is a timed test: hypothesis's per-example deadline (200 ms) fails on a loaded 2-core machine, so the default
# profile has none; example counts are unchanged.
settings.register_profile("anon_sql", deadline=None)
settings.load_profile("anon_sql")

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# Budgeted views are read with TimeZone = 'UTC' (anon_sql.data.session.PINNED), and DuckDB's default time zone is
# the process's: the suite runs in UTC whatever the machine's zone (and its subprocesses inherit it); the tests that
# need another zone set it themselves (tests/dp/test_hostile_round15_session.py).
os.environ["TZ"] = "UTC"
time.tzset()

# A few test modules reuse another folder's cases (e.g. the method battery's policies): every test folder is importable,
# so that any one folder or file runs alone, not only the whole suite.
for _folder in sorted(p for p in Path(__file__).resolve().parent.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))


def _session_folder(tmp_path_factory, variable: str) -> Iterator[Path]:
    """A folder of this test session in environment ``variable`` (restored after): the CLI's subprocesses inherit
    it, so no test writes to the user's own folders."""
    import os

    folder = tmp_path_factory.mktemp(variable.lower())
    before = os.environ.get(variable)
    os.environ[variable] = str(folder)
    yield folder
    if before is None:
        os.environ.pop(variable, None)
    else:
        os.environ[variable] = before


@pytest.fixture(scope="session", autouse=True)
def outputs_record(tmp_path_factory):
    """The record of the output files anon_sql wrote (anon_sql.cli.output.remember_output), never ~/.local/state."""
    yield from _session_folder(tmp_path_factory, "ANON_SQL_STATE_DIR")


@pytest.fixture(scope="session", autouse=True)
def check_cache(tmp_path_factory):
    """The check programs' cache (anon_sql.audit.program), never the user's ~/.cache."""
    yield from _session_folder(tmp_path_factory, "ANON_SQL_CACHE")


# One local SparkSession per test process (each xdist worker), shared by every Spark test module, with its settings in
# one place (each module used to ask for its own with getOrCreate, the last call's settings winning). Settings for
# tests on small data: one shuffle partition (a job over a few thousand rows is all task overhead), no UI, the JVM's
# quick JIT only (-XX:TieredStopAtLevel=1: a test JVM lives minutes, and C2's compiling cost more CPU than it saved);
# 4 GB of driver memory for the opt-in 1M-row runs (Mondrian there ran out of Spark's default 1 GB); a 256 MB code
# cache: with the quick JIT alone the JVM's default is 48 MB, and one worker's session compiling every test's generated
# classes filled it ("CodeCache is full", then VirtualMachineError and a dead gateway for every later Spark test: CI,
# session 17). docs/testing.md has the measurements. ANON_SQL_TEST_SPARK_CONF (JSON, a test-only hook) adds or
# overrides settings, to measure another choice.
SPARK_TEST_CONF = {"spark.driver.memory": "4g",
                   "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"}
SPARK_TEST_SHUFFLE_PARTITIONS = 1


@pytest.fixture(scope="session")
def spark_session():
    """The test process's one local SparkSession (skips without pyspark); stopped at the end of the session."""
    import json
    import os

    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]'); the Spark tests "
                                          "need it and Java 17+")
    from anon_sql import spark as aspark

    conf = {**SPARK_TEST_CONF, **json.loads(os.environ.get("ANON_SQL_TEST_SPARK_CONF") or "{}")}
    session = aspark.local_session(cores=2, shuffle_partitions=SPARK_TEST_SHUFFLE_PARTITIONS, conf=conf)
    yield session
    session.stop()


def working(release: str, part: str) -> str:
    """A release's working object as SQL (``"anon_work"."<release>__<part>"``), named by the product's one helper."""
    from anon_sql.compiler.views import working as working_table
    from anon_sql.common.sqlbuild import render

    return render(working_table(release, part))


def data_path(*parts: str) -> Path:
    path = DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data {path} not present")
    return path


@pytest.fixture
def con():
    c = duckdb.connect()
    anon_sql.install(c)
    yield c
    c.close()


@pytest.fixture(scope="module")
def mcon():
    """A catalog-installed in-memory connection shared by a test module."""
    c = duckdb.connect()
    anon_sql.install(c)
    yield c
    c.close()


def load_seed000(c: duckdb.DuckDBPyConnection, table: str = "t1") -> None:
    c.execute(f"CREATE TABLE {table} AS SELECT * FROM read_csv(?)", [str(data_path("examples", "seed000_table1.csv"))])


# θ noise example (seed 004, tests/methods/test_theta.py): at k = 4, μ = 0.6 and the sorted order, class 1 {Flu, Flu, HIV,
# Cancer} (σ² 0.6875 < 0.75) cannot reach θ by a swap without the later class {Flu, HIV, Cancer, Asthma} falling
# below it, so the θ method adds exactly one noise record (Asthma) to class 1.
THETA_NOISE_ROWS = ("CREATE TABLE {table} AS SELECT * FROM (VALUES (20, 'Flu'), (21, 'Flu'), (22, 'HIV'), "
                    "(23, 'Cancer'), (50, 'Flu'), (51, 'HIV'), (52, 'Cancer'), (53, 'Asthma')) t(age, disease)")


def load_theta_noise(c: duckdb.DuckDBPyConnection, table: str = "tn") -> None:
    """The θ noise example as table ``table`` (columns age, disease)."""
    c.execute(THETA_NOISE_ROWS.format(table=table))


def theta_noise_policy(name: str = "rn", source: str = "tn") -> dict:
    """The θ release of the noise example: one noise record in the first class, marked in column ``is_noise``."""
    return {"name": name, "source": source, "method": "theta", "seed": 7,
            "attributes": {"age": {"role": "quasi"}, "disease": {"role": "sensitive"}},
            "privacy": {"k": 4, "theta": {"mu": 0.6}}, "method_params": {"order": "sorted", "noise_flag": "is_noise"}}


@pytest.fixture(scope="module")
def adult():
    """A catalog-installed database holding Adult as table `adult` (shared by a test module)."""
    c = duckdb.connect()
    anon_sql.install(c)
    load_adult(c)
    yield c
    c.close()


def load_adult(c: duckdb.DuckDBPyConnection, table: str = "adult") -> None:
    c.execute(f"CREATE TABLE {table} AS SELECT * FROM read_csv(?, delim=';', header=true)",
              [str(data_path("adult", "adult.csv"))])


SEED000_TAXONOMIES = {
    "zip": {"kind": "mask"},
    "age": {"kind": "interval", "bounds": [[20, 35, 45, 65, 86], [20, 45, 86], [20, 86]]},
    "alcohol": {"kind": "mapping", "mapping": {"Low": ["Yes"], "Med": ["Yes"], "High": ["Yes"], "No": ["Any"]}},
}


def seed000_policy(method: str = "levels", **extra) -> dict:
    d = {
        "name": "r000", "source": "t1", "method": method, "count_column": "n", "default_role": "insensitive",
        "attributes": {"row": {"role": "identifier"},
                       **{q: {"role": "quasi", "taxonomy": t} for q, t in SEED000_TAXONOMIES.items()}},
        "privacy": {"k": 3},
    }
    d.update(extra)
    return d


ADULT_QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]


def adult_policy(levels: dict | None = None, **privacy) -> dict:
    return {
        "name": "adult_rel", "source": "adult", "method": "levels",
        "attributes": {**{q: {"role": "quasi", "taxonomy": f"adult_{q}"} for q in ADULT_QIS},
                       "salary-class": {"role": "sensitive"}},
        "privacy": {"k": 5, **privacy},
        "method_params": {"levels": levels or {}},
    }


def load_classes(c: duckdb.DuckDBPyConnection, classes: dict[str, str], table: str = "golden") -> None:
    """A table (zip, s) with one class per zip, its sensitive values one character each: {"1": "aabb", ...}."""
    import pandas as pd

    frame = pd.DataFrame({"zip": [z for z, s in classes.items() for _ in s],
                          "s": [v for s in classes.values() for v in s]})
    c.register("__classes_src", frame)
    c.execute(f'CREATE TABLE "{table}" AS SELECT * FROM __classes_src')
    c.unregister("__classes_src")


@pytest.fixture
def seed_db(tmp_path):
    """A database file with seed 000 as table t1 and its levels release r000 (zip 1, age 1); returns (db path,
    policy TOML path, tmp_path)."""
    from anon_sql.policy.model import Policy

    policy = seed000_policy(method_params={"levels": {"zip": 1, "age": 1}})
    db = str(tmp_path / "s.duckdb")
    c = duckdb.connect(db)
    anon_sql.install(c)
    load_seed000(c)
    anon_sql.release(c, policy)
    c.close()
    path = tmp_path / "p.toml"
    path.write_text(Policy.from_dict(policy).to_toml())
    return db, str(path), tmp_path


@pytest.fixture
def patients():
    """An in-memory database with the catalog and `pt`: 500 people (pid, age 20–69, sex F/M, zip = pid)."""
    c = duckdb.connect()
    anon_sql.install(c)
    c.execute("CREATE TABLE pt AS SELECT i AS pid, 20 + i % 50 AS age, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END "
              "AS sex, i AS zip FROM range(500) r(i)")
    yield c
    c.close()
