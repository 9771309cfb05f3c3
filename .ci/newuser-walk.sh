#!/usr/bin/env bash
# A new user's walk: README commands, the CLI on real data, DP, units, SDC, then bad inputs. Each step prints
# "ok"/"UNEXPECTED" with the exit code. Usage: bash .ci/newuser-walk.sh REPO VENV (from an empty folder;
# not run by .ci/run: a manual check on a fresh clone and its venv before a closing note)
REPO=$1; VENV=$2; A="$VENV/bin/anon-sql"; PY="$VENV/bin/python"
export ANON_SQL_STATE_DIR="$PWD/state"
fails=0
expect() { local want=$1; shift; local label=$1; shift
  "$@" >"out.$label" 2>&1; local rc=$?
  if [ "$rc" = "$want" ]; then echo "ok   rc=$rc $label"; else echo "UNEXPECTED rc=$rc (want $want) $label"; tail -5 "out.$label"; fails=$((fails+1)); fi; }
sum() { sha256sum "$1" | cut -c1-16; }

expect 0 demo "$A" demo; grep -q VERIFIED out.demo || { echo "UNEXPECTED demo: no VERIFIED"; fails=$((fails+1)); }
expect 0 demo-db "$A" demo --db clinic.duckdb
expect 0 analyze "$A" analyze adult_sample --db clinic.duckdb --leakage
# the README's SQL blocks, as written
"$PY" - "$REPO/README.md" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"Write `([^`]+)`[^\n]*:\n```(?:sql|toml)\n(.*?)```", text, re.S)
for name, body in blocks:
    open(name, "w").write(body)
    print("wrote", name)
PY
expect 0 tutorial "$A" run tutorial.sql --db clinic.duckdb
expect 0 refresh "$A" run refresh.sql --db clinic.duckdb
test -f adult_k5.parquet && echo "ok   adult_k5.parquet written" || { echo "UNEXPECTED no export"; fails=$((fails+1)); }
expect 0 replan sh -c "'$A' shell --db clinic.duckdb < replan.sql"
expect 0 dry-run "$A" release adult_k10.toml --db clinic.duckdb --dry-run --explain
expect 0 release "$A" release adult_k10.toml --db clinic.duckdb
expect 0 check "$A" check adult_k10 --db clinic.duckdb
expect 0 export "$A" export adult_k10 --db clinic.duckdb --to adult_k10.parquet
expect 0 release-to "$A" release adult_k10.toml --db clinic.duckdb --replace --to adult_k10.duckdb
expect 0 check-shared "$A" check adult_k10 --db adult_k10.duckdb
expect 0 dp "$A" run dp.sql --db clinic.duckdb
printf "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.6, delta = 1e-7) COUNT(*) AS n FROM adult_sample;\n" > over.sql
expect 3 dp-overspend "$A" run over.sql --db clinic.duckdb       # 0.5 of 1.0 left
# real data: the shared Adult CSV, a TOML of the user's own
ADULT=$(ls "$REPO"/../shared/data/adult/*.csv 2>/dev/null | head -1)
if [ -n "$ADULT" ]; then
  expect 0 load-adult "$VENV/bin/python" -c "import duckdb; c=duckdb.connect('real.duckdb'); c.execute(\"CREATE TABLE adult AS SELECT * FROM read_csv('$ADULT')\"); print(c.execute('select count(*) from adult').fetchall())"
  expect 0 assess-real "$A" assess adult --db real.duckdb --quasi age,sex,race
fi
# units: 199 people × 3 visits + one person with 6
"$PY" -c "
import duckdb; c=duckdb.connect('units.duckdb')
c.execute(\"CREATE TABLE visits AS SELECT p AS patient_id, 20 + p % 50 AS age, CASE WHEN p % 2 = 0 THEN 'F' ELSE 'M' END AS sex, 'd' || (p * 7 + v) % 9 AS diagnosis FROM range(199) a(p), range(3) b(v) UNION ALL SELECT 999, 97, 'F', 'd' || v FROM range(6) b(v)\")"
cat > visits.toml <<'T'
name = "visits_k5"
source = "visits"
method = "optimal"
seed = 0
privacy_unit = "patient_id"
[attributes.patient_id]
role = "identifier"
[attributes.age]
role = "quasi"
taxonomy = { kind = "interval", widths = [10, 20, 40] }
[attributes.sex]
role = "quasi"
taxonomy = { kind = "top" }
[attributes.diagnosis]
role = "sensitive"
[privacy]
k = 5
max_suppression = 0.05
T
expect 0 units-release "$A" release visits.toml --db units.duckdb
"$PY" -c "
import duckdb; c=duckdb.connect('units.duckdb', read_only=True)
n = c.execute('SELECT count(*) FROM visits_k5').fetchall()[0][0]
print('rows released:', n, '(597 = the 199 people of 3 visits; the 97-year-old woman suppressed)' if n == 597 else 'UNEXPECTED')"
sed 's/privacy_unit = "patient_id"//' visits.toml > visits_rows.toml
expect 2 units-repeated-identifier "$A" release visits_rows.toml --db units.duckdb
# bad inputs
cp visits.toml bad.toml; echo 'colour = "blue"' | cat - bad.toml > bad2.toml
expect 2 unknown-key "$A" release bad2.toml --db units.duckdb
sed 's/k = 5/k = "five"/' visits.toml > bad3.toml
expect 2 wrong-type "$A" release bad3.toml --db units.duckdb
expect 2 missing-file "$A" release nothere.toml --db units.duckdb
expect 2 exists "$A" release visits.toml --db units.duckdb            # the name is taken
"$PY" -c "import duckdb; duckdb.connect('units.duckdb').execute('CREATE TABLE mine AS SELECT 1 AS x')"
sed 's/name = "visits_k5"/name = "mine"/' visits.toml > clash.toml
b=$(sum units.duckdb); expect 2 collision-replace "$A" release clash.toml --db units.duckdb --replace
"$PY" -c "import duckdb; print('user table kept:', duckdb.connect('units.duckdb').execute('SELECT * FROM mine').fetchall())"
printf 'id,v\n' > mydata.csv; for i in $(seq 1 3000); do echo "$i,$((i*7))"; done >> mydata.csv
b=$(sum mydata.csv); expect 2 json-over-user-file "$A" check visits_k5 --db units.duckdb --json mydata.csv
[ "$(sum mydata.csv)" = "$b" ] && echo "ok   mydata.csv kept" || { echo "UNEXPECTED mydata.csv changed"; fails=$((fails+1)); }
expect 0 json-new "$A" check visits_k5 --db units.duckdb --json ours.json
expect 0 json-again "$A" check visits_k5 --db units.duckdb --json ours.json
expect 2 history-over-csv script -qec "'$A' shell --db units.duckdb --history mydata.csv" /dev/null
[ "$(sum mydata.csv)" = "$b" ] && echo "ok   mydata.csv kept after --history" || { echo "UNEXPECTED mydata.csv changed by --history"; fails=$((fails+1)); }
# budgeted views and the session (round 14, M35)
cat > m35.sql <<'S'
CREATE VIEW vg AS SELECT CASE WHEN coalesce(getvariable('split'), false) THEN patient_id * 10 ELSE patient_id END AS pid, diagnosis FROM visits;
CREATE PRIVACY BUDGET ON vg WITH (epsilon = 10, delta = 1e-5, privacy_unit = 'pid');
S
expect 2 budget-on-session-view "$A" run m35.sql --db units.duckdb
cat > m35b.sql <<'S'
CREATE VIEW vt AS SELECT patient_id AS pid, diagnosis FROM visits;
CREATE PRIVACY BUDGET ON vt WITH (epsilon = 10, delta = 1e-5, privacy_unit = 'pid');
S
expect 0 budget-on-plain-view "$A" run m35b.sql --db units.duckdb
printf "SET TimeZone = 'Asia/Tokyo';\nSELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(DISTINCT pid) AS n FROM vt;\n" > m35c.sql
expect 2 dp-under-changed-setting "$A" run m35c.sql --db units.duckdb
printf "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(DISTINCT pid) AS n FROM vt;\n" > m35d.sql
expect 0 dp-default-settings "$A" run m35d.sql --db units.duckdb
# tamper with the shared file: check fails with 3
cp adult_k10.duckdb tampered.duckdb
"$PY" -c "import duckdb; c=duckdb.connect('tampered.duckdb'); c.execute(\"UPDATE adult_k10 SET occupation = 'X' WHERE rowid = (SELECT min(rowid) FROM adult_k10)\")"
expect 3 check-tampered "$A" check adult_k10 --db tampered.duckdb
expect 2 binary-script sh -c "head -c 200 /dev/urandom > junk.sql; '$A' run junk.sql --db units.duckdb"
# session 16's steps
expect 2 demo-over-changed-sample "$A" demo --db clinic.duckdb        # refresh.sql added rows to adult_sample
printf 'SELECT 1;\n.quit\n' | script -qec "'$A' shell --db units.duckdb" /dev/null > out.shell-default 2>&1
test -s "$ANON_SQL_STATE_DIR/history" && echo "ok   default history in the state folder" || { echo "UNEXPECTED no state history"; fails=$((fails+1)); }
printf "CREATE TEMP TABLE visits_k5__base AS SELECT 1 AS mine;\nREFRESH ANONYMIZED VIEW visits_k5;\n" > reserved.sql
expect 2 refresh-beside-reserved-temp "$A" run reserved.sql --db units.duckdb
printf "SET default_order = 'DESC';\nSELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) AS n FROM vt;\n" > order.sql
expect 2 dp-under-default-order "$A" run order.sql --db units.duckdb
"$PY" -c "import duckdb; duckdb.connect('foreign.duckdb').execute('CREATE SCHEMA anon; CREATE MACRO anon.capped_sum(x) AS 42')"
expect 2 init-over-foreign-anon "$A" init --db foreign.duckdb
sed 's/^name = "visits_k5"/name = "visits_k5"/' visits.toml > /dev/null
printf "CREATE ANONYMIZED VIEW IF NOT EXISTS visits_k5 WITH (method = 'optimal', seed = 0, k = 5, privacy_unit = 'patient_id') AS SELECT identifier(patient_id), quasi(age, taxonomy => {'kind': 'interval', 'widths': [10, 20, 40]}), quasi(sex, taxonomy => {'kind': 'top'}), sensitive(diagnosis) FROM visits;\n" > ine.sql
expect 0 create-if-not-exists-noop "$A" run ine.sql --db units.duckdb
grep -q "nothing done" out.create-if-not-exists-noop && echo "ok   IF NOT EXISTS: nothing done" || { echo "UNEXPECTED IF NOT EXISTS output"; fails=$((fails+1)); }
# session 17's steps: a release table swapped by the user (check 3, export 2), an output path that is a dangling
# symlink (2), a standalone SDC output beside a user's TEMP table of its name (the user's table intact)
cp clinic.duckdb swapped.duckdb
"$PY" -c "import duckdb; c=duckdb.connect('swapped.duckdb'); c.execute('ALTER TABLE adult_k10 RENAME TO mine_k10'); c.execute('CREATE TABLE adult_k10 AS SELECT * FROM mine_k10')"
expect 3 check-swapped-table "$A" check adult_k10 --db swapped.duckdb
expect 2 export-swapped-table "$A" export adult_k10 --db swapped.duckdb --to swapped.parquet
ln -sfn elsewhere/made.json dangling.json
expect 2 json-to-dangling-symlink "$A" check adult_k10 --db clinic.duckdb --json dangling.json
test ! -e elsewhere/made.json && echo "ok   nothing written through the link" || { echo "UNEXPECTED written through a dangling link"; fails=$((fails+1)); }
"$PY" -c "
import duckdb
from anon_sql.sdc.perturb import perturb
c = duckdb.connect('clinic.duckdb')
c.execute('CREATE TEMP TABLE adult_sample__perturbed AS SELECT 42 AS mine')
try:
    perturb(c, 'adult_sample', {'age': {'kind': 'top_code', 'above': 80}}, seed=1)
    print('UNEXPECTED perturb wrote beside a TEMP table of its output name')
except Exception as e:
    print('ok   perturb refused:', type(e).__name__)
assert c.execute('SELECT * FROM temp.main.adult_sample__perturbed').fetchall() == [(42,)]
" | tee out.sdc-temp
grep -q UNEXPECTED out.sdc-temp && fails=$((fails+1))
echo "new-user walk: $fails unexpected"
