"""How Spark settings change the time of the Spark tests: runs the same pytest selection once per setting, the
settings alternated in every round (the machine is shared: report each setting's median as a ratio to the first
one, measured in the same run), each run a fresh process with the settings in ANON_SQL_TEST_SPARK_CONF (the
test-only hook of tests/conftest.py's ``spark_session``). Wall time and CPU time (user + system of pytest, its JVM and
Python workers): on a loaded machine the CPU time moves far less than the wall time.

    python bench/bench_spark_tests.py --repeat 3 tests/sdc/test_sdc_spark.py \\
        --setting base='{}' --setting aqe_off='{"spark.sql.adaptive.enabled": "false"}'
    python bench/bench_spark_tests.py --repeat 2 tests/contracts tests/dp \\
        --setting load='{"pytest_args": ["-n", "2", "--dist", "load"]}' \\
        --setting worksteal='{"pytest_args": ["-n", "2", "--dist", "worksteal"]}'

A setting's ``pytest_args`` (default ``-n 0``) replace the pytest options, to compare xdist's schedulers.

Not part of ``python -m bench`` (it times tests, minutes per run)."""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def descendants_cpu(root: int) -> dict[int, float]:
    """CPU seconds (user + system) so far of every live process below ``root``, read from /proc: the JVM that
    pyspark starts is never waited for by pytest, so the rusage of children misses it."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    out = {}
    for pid in cpu:
        p = pid
        while p in parent and p != root and p > 1:
            p = parent[p]
        if p == root and pid != root:
            out[pid] = cpu[pid]
    return out


def run_once(tests: list[str], conf: dict[str, str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of one pytest run of ``tests`` (one process: -n 0) under ``conf``, and its last line.
    CPU: pytest itself (rusage) plus the last reading of each process below it (the JVM, Python workers)."""
    conf = dict(conf)
    extra = conf.pop("pytest_args", ["-n", "0"])
    env = {**os.environ, "ANON_SQL_TEST_SPARK_CONF": json.dumps(conf)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra, *tests],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: dict[int, float] = {}
    while proc.poll() is None:
        now = descendants_cpu(proc.pid)
        seen.update(now)
        for pid in now:
            _is_java(pid)
        time.sleep(0.5)
    stdout = proc.stdout.read() if proc.stdout else ""
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # rusage counts pytest and the children it waited for; those children's last readings would count them twice,
    # so only the JVM (never waited for) is added from /proc
    jvm = sum(v for pid, v in seen.items() if _is_java(pid))
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime + jvm
    last = (stdout.strip().splitlines() or ["(no output)"])[-1]
    return wall, cpu, last


JAVA_PIDS: set[int] = set()


def _is_java(pid: int) -> bool:
    """Whether ``pid`` ran java (remembered: it may have exited by the time the run ends)."""
    if pid in JAVA_PIDS:
        return True
    try:
        if "java" in Path(f"/proc/{pid}/comm").read_text():
            JAVA_PIDS.add(pid)
            return True
    except OSError:
        pass
    return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tests", nargs="+", help="pytest node ids or files")
    ap.add_argument("--setting", action="append", required=True, metavar="NAME=JSON",
                    help="a named set of Spark settings; the first is the baseline of the ratios")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    settings = [(s.split("=", 1)[0], json.loads(s.split("=", 1)[1])) for s in args.setting]
    times: dict[str, list[float]] = {name: [] for name, _ in settings}
    cpus: dict[str, list[float]] = {name: [] for name, _ in settings}
    print(f"load before: {os.getloadavg()}", flush=True)
    for r in range(args.repeat):
        for name, conf in (settings if r % 2 == 0 else settings[::-1]):
            wall, cpu, last = run_once(args.tests, conf)
            times[name].append(wall)
            cpus[name].append(cpu)
            print(f"round {r + 1} {name}: {wall:.1f} s wall, {cpu:.1f} s CPU ({last}) load {os.getloadavg()[0]:.1f}",
                  flush=True)
    base, base_cpu = statistics.median(times[settings[0][0]]), statistics.median(cpus[settings[0][0]])
    first = settings[0][0]
    print(f"\n| setting | median wall s | ratio to {first} | median CPU s | ratio to {first} | wall runs |\n"
          "|---|---|---|---|---|---|")
    for name, _ in settings:
        med, med_cpu = statistics.median(times[name]), statistics.median(cpus[name])
        print(f"| {name} | {med:.1f} | {med / base:.2f} | {med_cpu:.1f} | {med_cpu / base_cpu:.2f} | "
              f"{' '.join(f'{t:.0f}' for t in times[name])} |")
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
