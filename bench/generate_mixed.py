"""The 1M-row data set of issue 29.3: Adult rows whose age, native-country and education come from three other
random rows (seeded), so that the distinct QI combinations grow with the rows (a resample of Adult keeps Adult's).

Written as ``adult.csv`` (Adult's header and ``;`` delimiter) into a folder, beside symlinks to the shared Adult
hierarchies, so that ARX's driver reads the very same rows:

    python bench/generate_mixed.py --rows 1000000          # → bench/data/adult_mixed_1000000
    ADULT_DIR=bench/data/adult_mixed_1000000 ../shared/tools/arx/arx-bench q8_k5_s0 3 1

The folder is made at run time (bench/data is ignored by git: never commit data or the symlinks). A folder that
already holds ``adult.csv`` of that many rows and seed (its ``.generated`` stamp) is reused.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import duckdb

ADULT_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult"
COLUMNS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation",
           "salary-class"]
MIXED = {"age": 1, "native-country": 2, "education": 3}    # column → which of the three other random rows


def generate_mixed(rows: int, out: Path, seed: int = 0) -> Path:
    """Write ``out/adult.csv`` (``rows`` rows, seeded) and symlink the Adult hierarchies beside it; return ``out``."""
    out = out.resolve()
    stamp = out / ".generated"
    wanted = {"rows": rows, "seed": seed, "mixed": sorted(MIXED)}
    if stamp.exists() and (out / "adult.csv").exists() and json.loads(stamp.read_text()) == wanted:
        return out
    out.mkdir(parents=True, exist_ok=True)
    for h in sorted(ADULT_DIR.glob("adult_hierarchy_*.csv")):
        link = out / h.name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(h)
    con = duckdb.connect()
    con.execute("CREATE TABLE adult AS SELECT row_number() OVER () - 1 AS i, * FROM read_csv(?, delim = ';', "
                "header = true, all_varchar = true)", [str(ADULT_DIR / "adult.csv")])
    n = con.execute("SELECT count(*) FROM adult").fetchall()[0][0]
    # row r: Adult row hash(r, seed, 0) mod n, with age / native-country / education from rows hash(r, seed, j)
    picks = ", ".join(f"CAST(hash(t.x, $seed, {j}) % $n AS BIGINT) AS p{j}" for j in range(4))
    joins = " ".join(f"JOIN adult a{j} ON a{j}.i = r.p{j}" for j in range(4))
    cols = ", ".join(f'a{MIXED.get(c, 0)}."{c}"' for c in COLUMNS)
    query = f"SELECT {cols} FROM (SELECT x, {picks} FROM range($rows) t(x)) r {joins} ORDER BY r.x"
    con.execute(f"CREATE TABLE mixed AS {query}", {"seed": seed, "n": n, "rows": rows})
    tmp = out / "adult.csv.tmp"
    path = str(tmp).replace("'", "''")
    con.execute(f"COPY mixed TO '{path}' (HEADER, DELIMITER ';')")
    tmp.replace(out / "adult.csv")
    stamp.write_text(json.dumps(wanted))
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--out", type=Path, default=None,
                    help="the folder (default bench/data/adult_mixed_<ROWS>)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out = args.out or Path(__file__).resolve().parent / "data" / f"adult_mixed_{args.rows}"
    print(generate_mixed(args.rows, out, args.seed))
